// stablebench site: filters the benchmark tables (no server, no library).
document.querySelectorAll('form.filters').forEach(function (form) {
  var table = document.getElementById(form.dataset.table);
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  function apply() {
    var want = {};
    form.querySelectorAll('select').forEach(function (s) { if (s.value) { want[s.name] = s.value; } });
    var text = form.querySelector('input[name=name]').value.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (r) {
      var ok = Object.keys(want).every(function (k) { return r.dataset[k] === want[k]; })
        && (text === '' || r.dataset.name.indexOf(text) >= 0);
      r.hidden = !ok;
      if (ok) { shown += 1; }
    });
    form.querySelector('output').textContent = shown + ' of ' + rows.length + ' benchmarks';
  }
  form.addEventListener('input', apply);
  form.addEventListener('submit', function (e) { e.preventDefault(); });
  apply();
});
