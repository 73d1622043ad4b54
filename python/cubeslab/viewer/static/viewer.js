// cubeslab view: three linked sections of a 3-D store. Planes come from the server as float32 with
// where they are in a header (x-plane: shape, level factors, origin); each view asks for as many
// samples as it has pixels, so the server answers from the coarsest overview level that covers them.
"use strict";

const WIDTH = 480;
const HEIGHT = 360;
// Each view: the axis it cuts, and which axes run across (x) and down (y) its canvas.
const LAYOUT = [
  { axis: 0, x: 1, y: 2 },
  { axis: 1, x: 0, y: 2 },
  { axis: 2, x: 1, y: 0 },
];
const token = new URLSearchParams(location.search).get("token");

// Colour maps: anchors interpolated into 256 entries.
const ANCHORS = {
  seismic: [[0, 0, 76], [0, 0, 255], [255, 255, 255], [255, 0, 0], [128, 0, 0]],
  grey: [[0, 0, 0], [255, 255, 255]],
  viridis: [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]],
};

function lut(name) {
  const anchors = ANCHORS[name];
  const table = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = (i / 255) * (anchors.length - 1);
    const a = Math.min(Math.floor(t), anchors.length - 2);
    const f = t - a;
    for (let c = 0; c < 3; c++) {
      table[i * 3 + c] = Math.round(anchors[a][c] * (1 - f) + anchors[a + 1][c] * f);
    }
  }
  return table;
}

const state = { store: null, meta: null, pos: [0, 0, 0], colormap: "seismic", clip: 99, focus: 0 };
const views = [];
let drawn = 0;

async function api(path) {
  const response = await fetch(path, { headers: token ? { "x-cubeslab-token": token } : {} });
  if (!response.ok) {
    throw new Error(`${path}: ${(await response.json()).error}`);
  }
  return response;
}

function percentile(sorted, p) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * (sorted.length - 1) + 0.5))];
}

// The clip range of a plane's finite values: symmetric about 0 for the seismic map.
function clipOf(values, p, symmetric) {
  const step = Math.max(1, Math.floor(values.length / 100000));
  const picked = new Float32Array(Math.ceil(values.length / step));
  let n = 0;
  for (let i = 0; i < values.length; i += step) {
    const v = values[i];
    if (Number.isFinite(v)) picked[n++] = symmetric ? Math.abs(v) : v;
  }
  const finite = picked.subarray(0, n).sort(); // a typed array sorts numerically, and fast
  if (symmetric) {
    const c = percentile(finite, p) || 1;
    return [-c, c];
  }
  const lo = percentile(finite, 100 - p);
  const hi = percentile(finite, p);
  return hi > lo ? [lo, hi] : [lo - 1, hi + 1];
}

function makeView(index) {
  const layout = LAYOUT[index];
  const root = document.createElement("section");
  root.className = "view";
  const title = document.createElement("h2");
  const canvas = document.createElement("canvas");
  canvas.width = WIDTH;
  canvas.height = HEIGHT;
  canvas.tabIndex = 0;
  const slider = document.createElement("input");
  slider.type = "range";
  slider.min = "0";
  root.append(title, canvas, slider);
  document.getElementById("views").append(root);
  const view = {
    index, layout, root, title, canvas, slider, ranges: null, plane: null, request: 0, clip: null, native: null,
  };
  slider.addEventListener("input", () => moveTo(layout.axis, Number(slider.value)));
  canvas.addEventListener("wheel", (event) => zoom(view, event), { passive: false });
  canvas.addEventListener("mousedown", (event) => press(view, event));
  canvas.addEventListener("mousemove", (event) => hover(view, event));
  canvas.addEventListener("focus", () => { state.focus = index; });
  return view;
}

// The sample under canvas pixel (px, py) along the view's x and y axes, at full resolution.
function sampleAt(view, px, py) {
  const [x0, x1] = view.ranges[view.layout.x];
  const [y0, y1] = view.ranges[view.layout.y];
  return [
    Math.min(x1 - 1, x0 + Math.floor((px * (x1 - x0)) / WIDTH)),
    Math.min(y1 - 1, y0 + Math.floor((py * (y1 - y0)) / HEIGHT)),
  ];
}

// Step one view to another plane: only it is fetched; the others move their crosshair.
function moveTo(axis, position) {
  const n = state.meta.shape[axis];
  state.pos[axis] = Math.max(0, Math.min(n - 1, position));
  views[axis].slider.value = String(state.pos[axis]);
  views.forEach((view) => { if (view.layout.axis !== axis && view.native) paint(view); });
  return load(views[axis]);
}

async function load(view) {
  const { axis, x, y } = view.layout;
  const others = [0, 1, 2].filter((d) => d !== axis);
  const [rows, cols] = others;
  const pixels = { [x]: WIDTH, [y]: HEIGHT };
  const query = new URLSearchParams({
    axis, index: state.pos[axis],
    r0: view.ranges[rows][0], r1: view.ranges[rows][1], c0: view.ranges[cols][0], c1: view.ranges[cols][1],
    h: pixels[rows], w: pixels[cols],
  });
  const request = ++view.request;
  const response = await api(`api/stores/${state.store}/plane?${query}`);
  const where = JSON.parse(response.headers.get("x-plane"));
  const values = new Float32Array(await response.arrayBuffer());
  if (request !== view.request) return; // a newer plane was asked for meanwhile
  view.plane = { values, where, rows, cols, index: state.pos[axis] };
  draw(view);
}

function draw(view) {
  const { values, where, rows } = view.plane;
  const [nr, nc] = where.shape;
  const transpose = view.layout.x === rows; // plane rows run across the canvas
  const width = transpose ? nr : nc;
  const height = transpose ? nc : nr;
  const table = lut(state.colormap);
  view.clip = clipOf(values, state.clip, state.colormap === "seismic");
  const [lo, hi] = view.clip;
  const image = new ImageData(width, height);
  for (let r = 0; r < nr; r++) {
    for (let c = 0; c < nc; c++) {
      const v = values[r * nc + c];
      const at = 4 * (transpose ? c * width + r : r * width + c);
      if (!Number.isFinite(v)) continue; // transparent: no trace here
      const t = Math.min(1, Math.max(0, (v - lo) / (hi - lo)));
      const i = Math.round(t * 255) * 3;
      image.data[at] = table[i];
      image.data[at + 1] = table[i + 1];
      image.data[at + 2] = table[i + 2];
      image.data[at + 3] = 255;
    }
  }
  view.native = new OffscreenCanvas(width, height);
  view.native.getContext("2d").putImageData(image, 0, 0);
  paint(view);
  const dims = state.meta.dims;
  const level = Math.max(...where.factors);
  view.title.textContent = `${dims[view.layout.axis]} ${state.meta.labels[dims[view.layout.axis]][view.plane.index]}` +
    (level > 1 ? ` (overview 1/${level})` : "");
  view.canvas.dataset.index = String(view.plane.index);
  view.canvas.dataset.factor = String(level);
  drawn++;
}

// The view's image stretched over its canvas, and the crosshair over it.
function paint(view) {
  const context = view.canvas.getContext("2d");
  context.imageSmoothingEnabled = false;
  context.clearRect(0, 0, WIDTH, HEIGHT);
  context.drawImage(view.native, 0, 0, WIDTH, HEIGHT);
  crosshair(view, context);
}

function crosshair(view, context) {
  const { x, y } = view.layout;
  const [x0, x1] = view.ranges[x];
  const [y0, y1] = view.ranges[y];
  const px = ((state.pos[x] + 0.5 - x0) / (x1 - x0)) * WIDTH;
  const py = ((state.pos[y] + 0.5 - y0) / (y1 - y0)) * HEIGHT;
  context.strokeStyle = "rgba(255, 215, 0, 0.8)";
  context.lineWidth = 1;
  context.beginPath();
  context.moveTo(px, 0); context.lineTo(px, HEIGHT);
  context.moveTo(0, py); context.lineTo(WIDTH, py);
  context.stroke();
}

function refresh() {
  return Promise.all(views.map(load));
}

function zoom(view, event) {
  event.preventDefault();
  const factor = event.deltaY < 0 ? 0.8 : 1.25;
  const rect = view.canvas.getBoundingClientRect();
  const fx = (event.clientX - rect.left) / rect.width;
  const fy = (event.clientY - rect.top) / rect.height;
  for (const [dim, f] of [[view.layout.x, fx], [view.layout.y, fy]]) {
    const [lo, hi] = view.ranges[dim];
    const n = state.meta.shape[dim];
    const span = Math.max(4, Math.min(n, Math.round((hi - lo) * factor)));
    const centre = lo + f * (hi - lo);
    const start = Math.max(0, Math.min(n - span, Math.round(centre - f * span)));
    view.ranges[dim] = [start, start + span];
  }
  load(view);
}

function press(view, event) {
  const rect = view.canvas.getBoundingClientRect();
  const start = { x: event.clientX, y: event.clientY, ranges: structuredClone(view.ranges) };
  let moved = false;
  const move = (e) => {
    const dx = e.clientX - start.x;
    const dy = e.clientY - start.y;
    if (Math.abs(dx) + Math.abs(dy) < 3) return;
    moved = true;
    for (const [dim, d, size] of [[view.layout.x, dx, rect.width], [view.layout.y, dy, rect.height]]) {
      const [lo, hi] = start.ranges[dim];
      const n = state.meta.shape[dim];
      const shift = Math.round((-d * (hi - lo)) / size);
      const from = Math.max(0, Math.min(n - (hi - lo), lo + shift));
      view.ranges[dim] = [from, from + (hi - lo)];
    }
    load(view);
  };
  const up = (e) => {
    window.removeEventListener("mousemove", move);
    window.removeEventListener("mouseup", up);
    if (moved) return;
    // A click: the other two views move to the clicked sample.
    const [sx, sy] = sampleAt(view, e.clientX - rect.left, e.clientY - rect.top);
    state.pos[view.layout.x] = sx;
    state.pos[view.layout.y] = sy;
    views.forEach((v) => { v.slider.value = String(state.pos[v.layout.axis]); });
    refresh();
  };
  window.addEventListener("mousemove", move);
  window.addEventListener("mouseup", up);
}

let hoverTimer = null;
let hoverRequest = 0;
function hover(view, event) {
  const rect = view.canvas.getBoundingClientRect();
  const [sx, sy] = sampleAt(view, event.clientX - rect.left, event.clientY - rect.top);
  const at = [...state.pos];
  at[view.layout.x] = sx;
  at[view.layout.y] = sy;
  clearTimeout(hoverTimer);
  hoverTimer = setTimeout(() => readout(at), 40);
}

// The value, labels and CDP X/Y at sample `at`; the server sends null where a number is not finite (no
// trace there). A failed request is said in the readout, which never keeps another sample's numbers.
async function readout(at) {
  const request = ++hoverRequest;
  let text;
  try {
    const query = `i=${at[0]}&j=${at[1]}&k=${at[2]}`;
    const found = await (await api(`api/stores/${state.store}/sample?${query}`)).json();
    const labels = Object.entries(found.labels).map(([k, v]) => `${k} ${v}`).join("  ");
    const xy = ["cdp_x", "cdp_y"].filter((name) => found[name] !== null)
      .map((name) => `  ${name} ${found[name]}`);
    const value = found.value === null ? "no trace" : found.value.toPrecision(6);
    text = `${labels}  value ${value}${xy.join("")}`;
  } catch (error) {
    text = `no value here: ${error.message}`;
  }
  if (request === hoverRequest) document.getElementById("readout").textContent = text; // the latest only
}

function resetRanges() {
  for (const view of views) {
    view.ranges = state.meta.shape.map((n) => [0, n]);
  }
}

async function open(id) {
  state.store = id;
  state.meta = await (await api(`api/stores/${id}`)).json();
  const isMsi = state.meta.kind === "msi";
  document.getElementById("views").hidden = isMsi;
  document.getElementById("msi").hidden = !isMsi;
  if (isMsi) {
    await window.msiView.open(state.meta);
    return;
  }
  state.pos = state.meta.shape.map((n) => Math.floor(n / 2));
  views.forEach((view) => {
    view.slider.max = String(state.meta.shape[view.layout.axis] - 1);
    view.slider.value = String(state.pos[view.layout.axis]);
  });
  resetRanges();
  document.getElementById("info").textContent = JSON.stringify(state.meta.info, null, 1);
  await refresh();
}

document.addEventListener("keydown", (event) => {
  const steps = { ArrowUp: 1, ArrowRight: 1, ArrowDown: -1, ArrowLeft: -1, PageUp: 10, PageDown: -10 };
  if (!(event.key in steps) || !state.meta || event.target.tagName === "INPUT") return;
  event.preventDefault();
  const axis = LAYOUT[state.focus].axis;
  moveTo(axis, state.pos[axis] + steps[event.key]);
});

async function start() {
  for (let i = 0; i < 3; i++) views.push(makeView(i));
  const stores = await (await api("api/stores")).json();
  const select = document.getElementById("store");
  for (const store of stores) select.add(new Option(store.name, store.id));
  select.addEventListener("change", () => open(select.value));
  document.getElementById("colormap").addEventListener("change", (event) => {
    state.colormap = event.target.value;
    views.forEach((v) => v.plane && draw(v));
    window.msiView.redraw();
  });
  document.getElementById("clip").addEventListener("input", (event) => {
    state.clip = Number(event.target.value);
    document.getElementById("clip-value").textContent = event.target.value;
    views.forEach((v) => v.plane && draw(v));
    window.msiView.redraw();
  });
  document.getElementById("reset").addEventListener("click", () => { resetRanges(); refresh(); });
  await open(stores[0].id);
}

// For tests and scripts: the state, the views, the colour maps and a count of planes drawn.
window.viewer = { state, views, lut, clipOf, ready: null, drawn: () => drawn };
window.addEventListener("DOMContentLoaded", () => { window.viewer.ready = start(); });
