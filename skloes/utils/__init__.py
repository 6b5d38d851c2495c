"""Internal utilities shared by the skloes estimators."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
