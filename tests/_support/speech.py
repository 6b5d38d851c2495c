"""Spoken clips for the speech tests, synthesized with espeak-ng (a system
package: ``apt-get install espeak-ng``); the voices are synthetic."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def synthesize(text, voice="en", speed=150, pitch=50):
    """``(rate, int16 waveform)`` of ``text`` spoken by espeak-ng's ``voice``;
    skips the test where espeak-ng is not installed."""
    from scipy.io import wavfile

    program = shutil.which("espeak-ng")
    if program is None:
        pytest.skip("espeak-ng is not installed: apt-get install espeak-ng")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "clip.wav"
        subprocess.run(
            [program, "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(out)]
            + [text],
            check=True,
            capture_output=True,
        )
        rate, wave = wavfile.read(out)
    return rate, wave
