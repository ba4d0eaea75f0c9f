/**
 * The page's script (vanilla JS, inlined by html.ts). It decodes the compact token data of a trace only
 * when its card is opened, and renders at most `max` tokens at a time ("show more" renders the next
 * ones), so a 32k-token trace costs its compact data and nothing more until asked for.
 *
 * Decoding matches tokens.ts: each token's bytes go through one streaming TextDecoder per rendered
 * range, so a character split over two tokens shows on the token that completes it.
 */
export const CLIENT_JS = String.raw`(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('polar-data').textContent);
  var enc = new TextEncoder();
  var VB = D.vocab.map(function (e) { return typeof e === 'string' ? enc.encode(e) : Uint8Array.from(e); });
  var SPECIAL = new Set(D.special);
  var REGION = ['tool_call', 'tool_response', 'think'];
  var CHUNK = D.max;
  var LOW = Math.log(0.1);

  function b64bytes(s) {
    var bin = atob(s);
    var out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function varints(s) {
    var b = b64bytes(s), out = [], v = 0, mul = 1;
    for (var i = 0; i < b.length; i++) {
      var x = b[i];
      v += (x & 127) * mul;
      if (x & 128) mul *= 128; else { out.push(v); v = 0; mul = 1; }
    }
    return out;
  }
  function state(tr) {
    if (tr._s) return tr._s;
    var ids = varints(tr.ids), P = tr.prompt_len, n = ids.length;
    var mask = new Uint8Array(n), pos = P, cur = 0;
    tr.mask.forEach(function (run) { for (var k = 0; k < run; k++) mask[pos++] = cur; cur ^= 1; });
    var lp = null;
    if (tr.lp) {
      var q = b64bytes(tr.lp), j = 0;
      lp = new Float32Array(n).fill(NaN);
      for (var i = P; i < n; i++) if (mask[i]) { lp[i] = -q[j] / 20; j++; }
    }
    var reg = new Uint8Array(n);
    tr.regions.forEach(function (r) { for (var i = r[0]; i < r[1] && i < n; i++) reg[i] |= 1 << r[2]; });
    var marks = {};
    tr.markers.forEach(function (m) { (marks[m.at] = marks[m.at] || []).push(m); });
    tr._s = { ids: ids, mask: mask, lp: lp, reg: reg, marks: marks, n: n };
    return tr._s;
  }
  function marker(m) {
    var el = document.createElement('span');
    el.className = 'mark mark-' + m.kind;
    el.textContent = m.label;
    if (m.title) el.title = m.title;
    return el;
  }
  function render(tr, box, from, to, dec) {
    var s = state(tr), frag = document.createDocumentFragment(), seg = null, segMask = -1;
    for (var i = from; i < to; i++) {
      var ms = s.marks[i];
      if (ms) { ms.forEach(function (m) { frag.appendChild(marker(m)); }); seg = null; }
      var prompt = i < tr.prompt_len, m = prompt ? 0 : s.mask[i];
      if (!seg || segMask !== m) {
        seg = document.createElement('span');
        seg.className = 'seg ' + (m ? 'm1' : 'm0') + (prompt ? ' prompt' : '');
        frag.appendChild(seg);
        segMask = m;
      }
      var v = s.ids[i], text = dec.decode(VB[v], { stream: true });
      var cls = 't';
      if (SPECIAL.has(v)) cls += ' sp';
      for (var k = 0; k < REGION.length; k++) if (s.reg[i] & (1 << k)) cls += ' r-' + REGION[k];
      if (m && s.lp && s.lp[i] < LOW) cls += ' low';
      if (text.indexOf('\n') >= 0) cls += ' nl';
      var t = document.createElement('span');
      t.className = cls;
      t.setAttribute('data-i', i);
      t.textContent = text;
      seg.appendChild(t);
    }
    if (to === s.n && s.marks[s.n]) s.marks[s.n].forEach(function (m) { frag.appendChild(marker(m)); });
    box.appendChild(frag);
  }
  function lazy(tr, box, bar, from, to) {
    var dec = new TextDecoder(), next = from;
    function update() {
      var left = to - next;
      bar.hidden = left <= 0;
      bar.querySelector('.left').textContent = left.toLocaleString('en-US') + ' more tokens not shown';
    }
    function more(count) {
      var end = Math.min(to, next + count);
      render(tr, box, next, end, dec);
      next = end;
      update();
    }
    bar.querySelector('.next').textContent = 'show next ' + CHUNK.toLocaleString('en-US');
    bar.querySelector('.next').addEventListener('click', function () { more(CHUNK); });
    bar.querySelector('.all').addEventListener('click', function () { more(to); });
    more(CHUNK);
  }
  function traceOf(el) {
    var d = el.closest('.trace').dataset;
    return D.sections[+d.sec][+d.traj][+d.trace];
  }
  function initTrace(el) {
    if (el.getAttribute('data-ready')) return;
    el.setAttribute('data-ready', '1');
    var tr = traceOf(el), s = state(tr);
    lazy(tr, el.querySelector('.response'), el.querySelector('.response-more'), tr.prompt_len, s.n);
    var p = el.querySelector('details.prompt');
    if (p) p.addEventListener('toggle', function () { if (p.open) initPrompt(p, tr); });
  }
  function initPrompt(p, tr) {
    if (p.getAttribute('data-ready')) return;
    p.setAttribute('data-ready', '1');
    lazy(tr, p.querySelector('.tokens'), p.querySelector('.prompt-more'), 0, tr.prompt_len);
  }
  function initCard(card) {
    if (!card.open) return;
    card.querySelectorAll('.trace').forEach(initTrace);
  }
  document.querySelectorAll('details.traj').forEach(function (card) {
    card.addEventListener('toggle', function () { initCard(card); });
    initCard(card);
  });
  function openAll(root, prompts) {
    root.querySelectorAll('details.section').forEach(function (d) { d.open = true; });
    root.querySelectorAll('details.traj').forEach(function (card) { card.open = true; initCard(card); });
    if (prompts) root.querySelectorAll('details.prompt').forEach(function (p) { p.open = true; initPrompt(p, traceOf(p)); });
  }
  document.querySelectorAll('button.open-all').forEach(function (b) {
    b.addEventListener('click', function () { openAll(b.closest('.section'), false); });
  });
  // #open-all opens every trajectory and prompt (for screenshots and printing)
  if (location.hash === '#open-all') openAll(document, true);
  document.addEventListener('mouseover', function (ev) {
    var t = ev.target;
    if (!t.classList || !t.classList.contains('t') || t.title) return;
    var tr = traceOf(t), s = state(tr), i = +t.getAttribute('data-i');
    var m = i < tr.prompt_len ? 'prompt' : 'mask ' + s.mask[i];
    var lp = s.lp && !isNaN(s.lp[i]) ? ' · logprob ' + s.lp[i].toFixed(2) : '';
    t.title = 'token ' + i + ' · id ' + D.vid[s.ids[i]] + ' · ' + m + lp;
  });
  // a table wider than the page scrolls: its box says so with a shade on its right edge
  document.querySelectorAll('.scroll').forEach(function (el) {
    if (el.scrollWidth > el.clientWidth + 1) el.classList.add('overflows');
  });
  document.body.setAttribute('data-rendered', '1');
})();
`;
