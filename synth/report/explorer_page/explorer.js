/* hopforge explorer: the question table and the detail of a question, from disk (file://).
   Data arrives by script tags that call hopforgeIndex(...) and hopforgeShard(k, ...); every
   string from the data is set as text (textContent / text nodes), never parsed as markup.
   Every string from the data is also shown in a bidi isolate (<bdi>, iso()), and so is each page title
   inside a question's text (isolated()): a right-to-left override in a title (U+202E) then ends with the
   title, instead of reversing the labels, separators and text shown after it. */
(function () {
  'use strict';

  var S = { data: null, cols: null, n: 0, filtered: null, page: 0, pageSize: 50, hay: null, hayDone: 0,
            shards: {}, waiting: {}, current: -1, openSeq: 0, byId: null };
  var HF = window.__hopforge = { ready: false, readyAt: null, paintedAt: null, searchReadyAt: null, errors: [], state: S };
  window.addEventListener('error', function (e) { HF.errors.push(String(e.message || e)); });

  function $(id) { return document.getElementById(id); }

  // el('div', {className: 'x', title: 't'}, [child, 'text', ...]): strings become text nodes.
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === 'className') node.className = attrs[k];
        else if (k === 'text') node.textContent = String(attrs[k]);
        else node.setAttribute(k, String(attrs[k]));
      }
    }
    append(node, children);
    return node;
  }
  function append(node, children) {
    if (children == null) return node;
    if (!Array.isArray(children)) children = [children];
    for (var i = 0; i < children.length; i++) {
      var c = children[i];
      if (c == null || c === false) continue;
      if (Array.isArray(c)) { append(node, c); continue; }  // nested lists of parts are flattened
      node.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  // A string of the data in a bidi isolate: its direction is its own (dir=auto), and an override or embedding
  // it opens ends where it ends.
  function iso(text) { return el('bdi', null, text == null ? '' : String(text)); }
  // The items, each isolated, with sep between them.
  function isoJoin(items, sep) {
    var out = [];
    (items || []).forEach(function (x, k) { if (k) out.push(sep); out.push(iso(x)); });
    return out;
  }
  // The page titles of a row of the index (they are stored joined by ' → ', for the search).
  function titleList(joined) { return joined ? String(joined).split(' → ') : []; }
  // text in an isolate, with every occurrence of one of the titles in an isolate of its own.
  function isolated(text, titles) {
    var ranges = [];
    (titles || []).slice().sort(function (a, b) { return b.length - a.length; })
      .forEach(function (t) { findAll(text, t, null, false, ranges); });
    return el('bdi', null, spans(text, ranges, 'bdi'));
  }
  // Tooltip text (an attribute, where no element can isolate): each title between FSI and PDI.
  function isoAttr(items, sep) {
    return (items || []).map(function (x) { return '\u2068' + x + '\u2069'; }).join(sep);
  }
  function fmt(x) {
    if (x == null) return '–';
    if (typeof x === 'number') return Number.isInteger(x) ? x.toLocaleString('en') : String(Math.round(x * 1e4) / 1e4);
    return String(x);
  }
  function pad(k) { var s = String(k); while (s.length < 5) s = '0' + s; return s; }

  // Text with the given ranges wrapped in <mark class=cls>; ranges are [start, end, cls].
  function marked(text, ranges) { return spans(text, ranges, 'mark'); }
  // Text with the given ranges (the first of overlapping ones, the longest at one start) wrapped in <tag>.
  function spans(text, ranges, tag) {
    var frag = document.createDocumentFragment();
    text = text == null ? '' : String(text);
    ranges = ranges.filter(function (r) { return r[1] > r[0]; })
      .sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var at = 0;
    for (var i = 0; i < ranges.length; i++) {
      var r = ranges[i];
      if (r[0] < at) continue;
      if (r[0] > at) frag.appendChild(document.createTextNode(text.slice(at, r[0])));
      frag.appendChild(el(tag, r[2] ? { className: r[2] } : null, text.slice(r[0], r[1])));
      at = r[1];
    }
    if (at < text.length) frag.appendChild(document.createTextNode(text.slice(at)));
    return frag;
  }
  function findAll(text, needle, cls, ignoreCase, out) {
    if (!needle || !text) return out;
    var hay = ignoreCase ? text.toLowerCase() : text, nd = ignoreCase ? needle.toLowerCase() : needle;
    var i = hay.indexOf(nd), count = 0;
    while (i >= 0 && count < 50) { out.push([i, i + nd.length, cls]); i = hay.indexOf(nd, i + nd.length); count++; }
    return out;
  }
  function findPageId(text, pid, out) {
    if (!text || !pid) return out;
    var esc = pid.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    var re = new RegExp('"page_id"\\s*:\\s*"' + esc + '"', 'g'), m, count = 0;
    while ((m = re.exec(text)) && count < 50) { out.push([m.index, m.index + m[0].length, 'gold']); count++; }
    return out;
  }

  // ---- loading -------------------------------------------------------------------------------
  function loadScript(src, onerror) {
    var s = document.createElement('script');
    s.src = src;
    s.async = true;
    s.onerror = onerror;
    document.head.appendChild(s);
  }
  window.hopforgeIndex = function (data) {
    S.data = data; S.cols = data.cols; S.n = data.n;
    try { init(); } catch (e) { HF.errors.push(String(e)); $('status').textContent = 'Error: ' + e; throw e; }
  };
  window.hopforgeShard = function (k, data) {
    S.shards[k] = data;
    var cbs = S.waiting[k] || [];
    delete S.waiting[k];
    cbs.forEach(function (cb) { cb(data, null); });
  };
  function shardOf(i) {  // the last shard that starts at or before position i
    var st = S.data.shard_starts, lo = 0, hi = st.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (st[mid] <= i) lo = mid; else hi = mid - 1; }
    return lo;
  }
  function getShard(k, cb) {
    if (S.shards[k]) { cb(S.shards[k], null); return; }
    if (S.waiting[k]) { S.waiting[k].push(cb); return; }
    S.waiting[k] = [cb];
    loadScript('explorer/shard-' + pad(k) + '.js', function () {
      var cbs = S.waiting[k] || [];
      delete S.waiting[k];
      cbs.forEach(function (f) { f(null, 'could not load explorer/shard-' + pad(k) + '.js'); });
    });
  }

  // ---- overview ------------------------------------------------------------------------------
  function renderOverview(meta) {
    clear($('title'));
    append($('title'), ['hopforge explorer: ', iso(meta.run)]);
    var funnel = $('funnel');
    if (meta.funnel && meta.funnel.length) {
      clear(funnel);
      var tb = el('tbody');
      meta.funnel.forEach(function (r) {
        var dropped = r.dropped || {}, total = 0, parts = [];
        Object.keys(dropped).sort(function (a, b) { return dropped[b] - dropped[a]; }).forEach(function (k) {
          total += dropped[k];
          if (dropped[k]) parts.push(k + ' ' + fmt(dropped[k]));
        });
        var share = r.input ? Math.min(1, r.output / r.input) : 0;
        tb.appendChild(el('tr', null, [
          el('td', null, r.stage), el('td', { className: 'num' }, fmt(r.input)), el('td', { className: 'num' }, fmt(r.output)),
          el('td', { className: 'num' }, fmt(total)),
          el('td', { className: 'bar' }, el('div', { className: 'barbox', title: Math.round(share * 100) + '% kept' },
            el('div', { className: 'barfill', style: 'width:' + (share * 100).toFixed(1) + '%' }))),
          el('td', null, parts.join(', ') || '–')]));
      });
      funnel.appendChild(el('table', { className: 'funnel' }, [
        el('thead', null, el('tr', null, [el('th', null, 'stage'), el('th', { className: 'num' }, 'input'),
          el('th', { className: 'num' }, 'output'), el('th', { className: 'num' }, 'dropped'), el('th', null, 'output / input'),
          el('th', null, 'drop reasons')])), tb]));
    }
    var chips = $('summary');
    clear(chips);
    var summary = meta.summary || {};
    Object.keys(summary).forEach(function (k) { chips.appendChild(el('span', { className: 'chip' }, k + ': ' + fmt(summary[k]))); });
    if (meta.chain && meta.chain.length) chips.appendChild(el('span', { className: 'chip' }, 'filter chain: ' + meta.chain.join(' → ')));
    var figs = $('figures');
    if (meta.figures && meta.figures.length) {
      clear(figs);
      meta.figures.forEach(function (f) {
        var img = el('img', { alt: f.caption || f.file, loading: 'lazy' });
        img.src = f.file;
        figs.appendChild(el('figure', null, [el('a', { href: f.file, target: '_blank' }, img),
          el('figcaption', null, (f.caption ? f.caption + ' ' : '') + '(' + f.file + ')')]));
      });
    }
  }

  // ---- the table -----------------------------------------------------------------------------
  function init() {
    var d = S.data;
    renderOverview(d.meta || { run: '' });
    var fs = $('f-split');
    d.splits.forEach(function (s, i) { fs.appendChild(el('option', { value: i }, s || '(none: dropped question)')); });
    var fr = $('f-reason');
    d.reasons.map(function (r, i) { return [r, i]; })
      .sort(function (a, b) { return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0; })
      .forEach(function (p) { fr.appendChild(el('option', { value: p[1] }, p[0] + ' (' + fmt(d.reason_counts[p[1]]) + ')')); });
    ['f-split', 'f-kept', 'f-reason'].forEach(function (id) { $(id).addEventListener('change', applyFilters); });
    $('search').addEventListener('input', applyFilters);
    $('page-size').addEventListener('change', function () { S.pageSize = +this.value; S.page = 0; renderTable(); });
    $('reset').addEventListener('click', function () {
      $('search').value = ''; $('f-split').value = '-1'; $('f-kept').value = '-1'; $('f-reason').value = '-1';
      applyFilters();
    });
    $('first').addEventListener('click', function () { goPage(0); });
    $('prev').addEventListener('click', function () { goPage(S.page - 1); });
    $('next').addEventListener('click', function () { goPage(S.page + 1); });
    $('last').addEventListener('click', function () { goPage(Infinity); });
    $('page-jump').addEventListener('change', function () { goPage((+this.value || 1) - 1); });
    $('rows').addEventListener('click', function (e) {
      var tr = e.target.closest ? e.target.closest('tr') : null;
      if (tr && tr.dataset.i != null) openQuestion(+tr.dataset.i);
    });
    $('rows').addEventListener('keydown', function (e) {
      if (e.key !== 'Enter') return;
      var tr = e.target.closest ? e.target.closest('tr') : null;
      if (tr && tr.dataset.i != null) openQuestion(+tr.dataset.i);
    });
    window.addEventListener('hashchange', openFromHash);
    S.pageSize = +$('page-size').value;
    applyFilters();
    $('status').textContent = fmt(S.n) + ' questions; their detail in ' + fmt(d.shard_starts.length) + ' shards, loaded when opened.';
    HF.ready = true;
    HF.readyAt = performance.now();
    requestAnimationFrame(function () {
      setTimeout(function () { HF.paintedAt = performance.now(); buildHaystackWhenIdle(); }, 0);
    });
    document.body.setAttribute('data-ready', '1');
    openFromHash();
  }

  // The search text of every row, lower-cased: built in idle time after the table is drawn, or at once
  // by the first search that needs it.
  function haystackStep(limit) {
    var c = S.cols, end = Math.min(S.n, S.hayDone + limit);
    if (!S.hay) S.hay = new Array(S.n);
    for (var i = S.hayDone; i < end; i++) S.hay[i] = (c.id[i] + '\n' + c.text[i] + '\n' + c.answer[i] + '\n' + c.titles[i]).toLowerCase();
    S.hayDone = end;
    return end >= S.n;
  }
  function haystack() {
    if (S.hayDone < S.n || !S.hay) haystackStep(S.n);
    return S.hay;
  }
  function buildHaystackWhenIdle() {
    if (haystackStep(5000)) { HF.searchReadyAt = performance.now(); return; }
    if (window.requestIdleCallback) window.requestIdleCallback(buildHaystackWhenIdle); else setTimeout(buildHaystackWhenIdle, 20);
  }

  function applyFilters() {
    var c = S.cols, n = S.n;
    var sp = +$('f-split').value, kp = +$('f-kept').value, rs = +$('f-reason').value;
    var q = $('search').value.trim().toLowerCase();
    var terms = q ? q.split(/\s+/) : [], nt = terms.length;
    var hay = nt ? haystack() : null;
    var out = new Int32Array(n), m = 0;
    var split = c.split, status = c.status, reason = c.reason, treasons = c.trace_reasons;
    outer:
    for (var i = 0; i < n; i++) {
      if (sp >= 0 && split[i] !== sp) continue;
      if (kp >= 0 && status[i] !== kp) continue;
      if (rs >= 0 && reason[i] !== rs && treasons[i].indexOf(rs) < 0) continue;
      if (nt) { var h = hay[i]; for (var t = 0; t < nt; t++) if (h.indexOf(terms[t]) < 0) continue outer; }
      out[m++] = i;
    }
    S.filtered = out.subarray(0, m);
    S.page = 0;
    renderTable();
  }

  function goPage(p) {
    var pages = Math.max(1, Math.ceil(S.filtered.length / S.pageSize));
    S.page = Math.max(0, Math.min(pages - 1, p));
    renderTable();
  }

  function outcomeCell(i) {
    var c = S.cols, d = S.data, st = c.status[i];
    if (st === 1) return el('span', { className: 'kept' }, 'kept · ' + d.labels[c.label[i]]);
    if (st === 2) return el('span', { className: 'unfiltered' }, 'not filtered');
    return el('span', { className: 'dropped' }, 'dropped · ' + (c.reason[i] >= 0 ? d.reasons[c.reason[i]] : '?'));
  }

  function renderTable() {
    var c = S.cols, f = S.filtered, tb = $('rows');
    var pages = Math.max(1, Math.ceil(f.length / S.pageSize));
    var lo = S.page * S.pageSize, hi = Math.min(f.length, lo + S.pageSize);
    var frag = document.createDocumentFragment();
    for (var k = lo; k < hi; k++) {
      var i = f[k];
      var titles = titleList(c.titles[i]);
      var tr = el('tr', { 'data-i': i, 'data-qid': c.id[i], tabindex: 0, title: isoAttr(titles, ' → ') }, [
        el('td', { className: 'qid' }, iso(c.id[i])), el('td', { className: 'text' }, isolated(c.text[i], titles)),
        el('td', null, isolated(c.answer[i], titles)),
        el('td', null, iso(S.data.splits[c.split[i]] || '–')), el('td', { className: 'num' }, c.hops[i] >= 0 ? c.hops[i] : '–'),
        el('td', { className: 'num', title: 'effective depth: hops a solver with a search tool must walk' },
          c.depth && c.depth[i] >= 0 ? c.depth[i] + '/' + c.hops[i] : '–'),
        el('td', null, outcomeCell(i)), el('td', { className: 'num' }, c.n[i] ? c.c[i] + '/' + c.n[i] : '–')]);
      if (i === S.current) tr.className = 'selected';
      frag.appendChild(tr);
    }
    clear(tb);
    tb.appendChild(frag);
    $('count').textContent = f.length === S.n ? fmt(S.n) + ' questions'
      : fmt(f.length) + ' of ' + fmt(S.n) + ' questions match';
    $('page-info').textContent = f.length ? 'rows ' + fmt(lo + 1) + '–' + fmt(hi) + ' · page ' + fmt(S.page + 1) + ' of ' + fmt(pages)
      : 'no rows';
    $('page-jump').value = S.page + 1;
    $('page-jump').max = pages;
    $('prev').disabled = $('first').disabled = S.page === 0;
    $('next').disabled = $('last').disabled = S.page >= pages - 1;
  }

  // ---- one question --------------------------------------------------------------------------
  function openFromHash() {
    var h = location.hash;
    if (h.indexOf('#q=') !== 0) return;
    var id = decodeURIComponent(h.slice(3));
    if (S.current >= 0 && S.cols.id[S.current] === id) return;
    if (!S.byId) { S.byId = {}; for (var i = 0; i < S.n; i++) S.byId[S.cols.id[i]] = i; }
    if (Object.prototype.hasOwnProperty.call(S.byId, id)) openQuestion(S.byId[id]);
  }

  function openQuestion(i) {
    S.current = i;
    var rows = $('rows').children;
    for (var r = 0; r < rows.length; r++) rows[r].className = +rows[r].dataset.i === i ? 'selected' : '';
    var id = S.cols.id[i], seq = ++S.openSeq, box = $('detail');
    try { if (history.replaceState) history.replaceState(null, '', '#q=' + encodeURIComponent(id)); } catch (e) { /* file:// */ }
    box.setAttribute('data-qid', id);
    box.setAttribute('data-state', 'loading');
    clear(box);
    box.appendChild(el('p', { className: 'muted' }, ['Loading ', iso(id), '…']));
    var k = shardOf(i);
    getShard(k, function (shard, err) {
      if (seq !== S.openSeq) return;
      clear(box);
      if (err || !shard) { box.appendChild(el('p', { className: 'warn' }, err || 'no data')); box.setAttribute('data-state', 'error'); return; }
      var d = shard.questions[i - shard.start];
      if (!d || d.id !== id) { box.appendChild(el('p', { className: 'warn' }, ['question ', iso(id), ' not in its shard'])); box.setAttribute('data-state', 'error'); return; }
      renderDetail(box, i, d);
      box.scrollTop = 0;
      box.setAttribute('data-state', 'ready');
    });
  }

  function kv(rows) {
    var tb = el('tbody');
    rows.forEach(function (r) { if (r[1] != null && r[1] !== '') tb.appendChild(el('tr', null, [el('th', null, r[0]), el('td', null, r[1])])); });
    return el('table', { className: 'kv' }, tb);
  }

  function depthText(q) {
    if (q.effective_depth == null) return null;
    var n = (q.path || []).length - 1;
    return [q.effective_depth + ' of ' + n + ' hops',
      q.entry ? [' — entered by the ' + (q.entered_by || 'tool') + ' adversary: ', isolated(q.entry, q.titles)]
        : ' (no single search of any adversary enters the chain after its start)'];
  }

  function renderDetail(box, i, d) {
    var c = S.cols, q = d.question, x = d.rejected;
    box.appendChild(el('h3', null, iso(d.id)));
    box.appendChild(el('p', null, [outcomeCell(i), ' ',
      el('span', { className: 'badge' }, ['split ', iso(S.data.splits[c.split[i]] || '–')]),
      q ? el('span', { className: 'badge' }, q.kind) : null,
      el('span', { className: 'badge', title: 'correct traces / traces' }, 'c/n ' + d.c + '/' + d.n)]));
    var titles = q ? q.titles || [] : (d.source ? d.source.titles || [] : []);
    var path = q ? q.path || [] : (d.source ? d.source.path || [] : []);
    if (q) {
      box.appendChild(el('div', { className: 'qtext' }, isolated(q.question, titles)));
      box.appendChild(kv([['answer', isolated(q.answer, titles)],
        ['aliases', (q.answer_aliases || []).length ? isoJoin(q.answer_aliases, ', ') : null],
        ['written from', iso(q.source_id)], ['teacher', iso(q.teacher_model)], ['effective depth', depthText(q)]]));
    }
    if (x) {
      box.appendChild(el('p', { className: 'warn' }, ['Dropped by the questions stage: ' + x.reason,
        x.detail ? [' — ', isolated(x.detail, titles)] : null]));
      if (x.question) box.appendChild(el('div', { className: 'qtext' }, isolated(x.question, titles)));
      if (x.raw) box.appendChild(el('details', null, [el('summary', null, 'teacher output'), el('pre', null, x.raw)]));
      if (d.source) box.appendChild(el('p', { className: 'muted' }, ['Written from ' + d.source.kind + ' ', iso(d.source.id),
        d.source.kind === 'subgraph' ? [' (' + titles.length + ' pages: ', isoJoin(titles, ', '), ')'] : null]));
    }
    if (d.hops && d.hops.length) {
      box.appendChild(el('h4', null, ['Path: ', isoJoin(titles, ' → ')]));
      var ol = el('ol', { className: 'path' });
      d.hops.forEach(function (h) {
        var li = el('li', null, [el('strong', null, iso(h.from)), ' → ', el('strong', null, iso(h.to))]);
        if (h.sub_question) li.appendChild(el('div', { className: 'muted' }, isolated(h.sub_question, titles)));
        var ev = h.evidence;
        if (ev) {
          var note = ev.reverse ? ['evidence: ', iso(h.to), ' links back to ', iso(h.from)] : ['evidence: the link in ', iso(h.from)];
          li.appendChild(el('div', { className: 'muted' }, note.concat([' (paragraph ' + ev.paragraph_id + ', anchor “', iso(ev.anchor || ''), '”)'])));
          li.appendChild(el('blockquote', { className: 'evidence' }, marked(ev.paragraph, findAll(ev.paragraph, ev.anchor, 'anchor', false, []))));
        } else {
          li.appendChild(el('div', { className: 'muted' }, 'no evidence stored for this hop'));
        }
        ol.appendChild(li);
      });
      box.appendChild(ol);
    }
    box.appendChild(el('h4', null, 'Traces (' + d.c + ' of ' + d.n + ' correct)'));
    if (!d.traces.length) box.appendChild(el('p', { className: 'muted' }, 'No traces.'));
    d.traces.forEach(function (t) { box.appendChild(renderTrace(t, path, titles)); });
  }

  function renderTrace(t, path, titles) {
    var v = t.verdict, ok = v ? v.correct : null;
    var state = !v ? 'not filtered' : v.kept ? 'kept' : 'dropped: ' + v.reason;
    var sum = el('summary', null, ['#' + t.sample + ' · ',
      el('span', { className: ok ? 'kept' : ok === false ? 'dropped' : 'muted' }, ok ? '✓ correct' : ok === false ? '✗ wrong' : '? ungraded'),
      ' · ', el('span', { className: v && v.kept ? 'kept' : v ? 'dropped' : 'muted' }, state),
      ' · ' + fmt(t.turns) + ' turns · ' + fmt(t.calls) + ' tool calls · answer: ', t.answer == null ? '–' : isolated(t.answer, titles)]);
    var det = el('details', { className: 'trace', 'data-trace': t.id }, sum);
    det.appendChild(el('div', { className: 'muted' }, [iso(t.id), t.model ? [' · ', iso(t.model)] : null,
      t.stop ? ' · stop: ' + t.stop : null, t.protocol ? ' · tools: ' + t.protocol : null, t.error ? [' · error: ', iso(t.error)] : null]));
    if (t.filters && t.filters.length) {
      var tb = el('tbody');
      t.filters.forEach(function (f) {
        tb.appendChild(el('tr', { 'data-filter': f.filter }, [el('td', null, f.filter), el('td', { className: f.status }, f.status),
          el('td', null, f.reason || ''), el('td', null, isolated(f.detail || '', titles))]));
      });
      det.appendChild(el('table', { className: 'filters' }, [el('thead', null, el('tr', null, [el('th', null, 'filter'),
        el('th', null, 'verdict'), el('th', null, 'reason'), el('th', null, 'detail')])), tb]));
    }
    if (v) {
      det.appendChild(el('div', { className: 'chips' }, [['F1', v.f1], ['EM', v.em], ['rule', v.rule_correct], ['match', v.match], ['judge', v.judge_correct],
        ['rubric', v.rubric], ['ungrounded steps', v.ungrounded_steps], ['tokens', v.n_tokens]].map(function (p) {
        return el('span', { className: 'chip' }, p[0] + ': ' + fmt(typeof p[1] === 'boolean' ? String(p[1]) : p[1]));
      })));
    }
    if (t.missing) { det.appendChild(el('p', { className: 'warn' }, 'This trace is no longer in the traces table.')); return det; }
    var gold = t.gold || [], seen = t.gold_first_seen || [];
    if (gold.length) {
      var ul = el('ul', { className: 'gold-list' });
      gold.forEach(function (pid, j) {
        var name = titleOf(pid, j, path, titles), s = seen[j];
        ul.appendChild(el('li', { className: s >= 0 ? '' : 'never' }, ['gold ' + (j + 1) + ' ', name, ': ' +
          (s > 0 ? 'first seen at turn ' + s : s === 0 ? 'given in the prompt' : 'never seen')]));
      });
      det.appendChild(el('h4', null, 'Gold pages'));
      det.appendChild(ul);
    }
    if (t.problem) det.appendChild(el('p', { className: 'warn' }, 'Conversation problem: ' + t.problem));
    var conv = el('div', { className: 'conv' });
    (t.messages || []).forEach(function (m) { conv.appendChild(renderMessage(m, gold, path, titles)); });
    det.appendChild(conv);
    return det;
  }

  function titleOf(pid, j, path, titles) {
    var k = path.indexOf(pid);
    return k >= 0 && titles[k] ? [iso(titles[k]), ' (', iso(pid), ')'] : [iso(pid)];
  }

  function goldRanges(text, m, gold, path, titles) {
    var out = [];
    (m.gold || []).forEach(function (j) {
      var pid = gold[j], k = path.indexOf(pid);
      findPageId(text, pid, out);
      if (k >= 0) findAll(text, titles[k], 'gold', true, out);
    });
    return out;
  }

  function renderMessage(m, gold, path, titles) {
    var isGold = m.gold && m.gold.length;
    var badges = (m.gold || []).map(function (j) {
      return el('span', { className: 'badge gold' }, ['★ first sight of gold ' + (j + 1) + ': '].concat(titleOf(gold[j], j, path, titles)));
    });
    var cut = m.cut ? ' (' + fmt(m.cut) + ' characters left out)' : '';
    var text = m.text == null ? '' : m.text;
    var body = el('pre', null, isGold ? marked(text, goldRanges(text, m, gold, path, titles)) : text);
    if (m.role === 'system') {
      return el('div', { className: 'msg system' }, el('details', null, [el('summary', null, 'system prompt'), body]));
    }
    if (m.role === 'tool') {
      var obs = el('details', { className: 'obs' }, [el('summary', null,
        ['↳ observation' + (m.name ? ' from ' + m.name : '') + ' · ' + fmt(text.length) + ' characters' + cut].concat(badges)), body]);
      return el('div', { className: 'msg tool' + (isGold ? ' gold' : ''), 'data-gold': isGold ? m.gold.join(',') : null }, obs);
    }
    var who = m.role === 'assistant' ? 'assistant · turn ' + m.turn : m.role;
    var div = el('div', { className: 'msg ' + m.role + (isGold ? ' gold' : ''), 'data-gold': isGold ? m.gold.join(',') : null },
      [el('div', { className: 'who' }, [who + cut].concat(badges))]);
    if (m.reasoning) div.appendChild(el('details', null, [el('summary', null, 'reasoning'), el('pre', null, m.reasoning)]));
    if (text) div.appendChild(body);
    (m.calls || []).forEach(function (tc) {
      var args = tc.args, pretty = args;
      try { pretty = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* not JSON: as written */ }
      var short = args && args.length > 90 ? args.slice(0, 90) + '…' : args;
      div.appendChild(el('details', { className: 'call', 'data-tool': tc.name }, [
        el('summary', null, ['call ' + tc.name + ' ', iso(short || '')]), el('pre', null, pretty)]));
    });
    return div;
  }

  // ---- start ---------------------------------------------------------------------------------
  loadScript('explorer/index-data.js', function () {
    $('status').textContent = 'Could not load explorer/index-data.js: keep index.html beside its explorer/ folder.';
    HF.errors.push('index-data.js failed to load');
  });
})();
