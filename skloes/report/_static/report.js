
function skloesReport(root){
  if(!root||root.dataset.ready)return;root.dataset.ready="1";
  var num=function(td){var v=parseFloat(td.getAttribute("data-value"));
    return isNaN(v)?null:v;};
  root.querySelectorAll("table.sortable").forEach(function(table){
    var ths=table.querySelectorAll("thead th");
    ths.forEach(function(th,k){
      var b=document.createElement("button");b.type="button";
      b.textContent=th.textContent;th.textContent="";th.appendChild(b);
      b.addEventListener("click",function(){
        var asc=th.getAttribute("aria-sort")!=="ascending";
        ths.forEach(function(o){o.removeAttribute("aria-sort");});
        th.setAttribute("aria-sort",asc?"ascending":"descending");
        var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(r,s){var a=num(r.cells[k]),c=num(s.cells[k]);
          if(a===null&&c===null)return 0;if(a===null)return 1;if(c===null)return -1;
          return asc?a-c:c-a;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  var table=root.querySelector("table.layers"),tip=root.querySelector(".tip"),
      box=root.querySelector(".profile"),col=root.querySelector(".hl-col");
  if(!table||!tip||!box)return;
  var names=Array.prototype.map.call(table.querySelectorAll("thead th"),
    function(th){return th.getAttribute("data-col");});
  var rowOf=function(i){return table.querySelector('tr[data-layer="'+i+'"]');};
  var mark=function(i){return root.querySelector('circle.mark[data-layer="'+i+'"]');};
  var off=function(){tip.hidden=true;if(col)col.setAttribute("visibility","hidden");
    root.querySelectorAll("tr.hl").forEach(function(r){r.classList.remove("hl");});
    root.querySelectorAll("circle.mark.on").forEach(function(c){c.classList.remove("on");});};
  var on=function(i,hit){off();var row=rowOf(i);if(!row)return;row.classList.add("hl");
    var m=mark(i);if(m)m.classList.add("on");
    if(hit&&col){col.setAttribute("x",hit.getAttribute("x"));
      col.setAttribute("visibility","visible");}
    tip.textContent="";var h=document.createElement("b");h.textContent="layer "+i;
    tip.appendChild(h);
    Array.prototype.forEach.call(row.cells,function(td,k){
      if(names[k]==="layer")return;var d=document.createElement("div");
      d.setAttribute("data-col",names[k]);
      d.textContent=names[k]+": "+(td.textContent||(names[k]==="selected"?"no":"-"));
      tip.appendChild(d);});
    tip.hidden=false;
    if(hit){var r=hit.getBoundingClientRect(),b=box.getBoundingClientRect();
      var x=r.left-b.left+r.width+8;
      if(x+tip.offsetWidth>b.width)x=r.left-b.left-tip.offsetWidth-8;
      tip.style.left=Math.max(0,x)+"px";tip.style.top=(r.top-b.top+20)+"px";}};
  root.querySelectorAll("rect.hit").forEach(function(hit){
    var i=hit.getAttribute("data-layer");
    hit.addEventListener("mouseenter",function(){on(i,hit);});
    hit.addEventListener("mouseleave",off);});
  Array.prototype.forEach.call(table.tBodies[0].rows,function(row){
    row.addEventListener("mouseenter",function(){var i=row.getAttribute("data-layer");
      off();row.classList.add("hl");var m=mark(i);if(m)m.classList.add("on");});
    row.addEventListener("mouseleave",off);});
}
