// cubeslab view, mass-spectrometry imaging stores: the ion image at an m/z with a tolerance, and the
// spectrum at a clicked pixel as a plot with an m/z axis; clicking the plot picks that m/z.
// Uses viewer.js's api(), lut(), clipOf() and state.
"use strict";

const msiView = (() => {
  const ion = document.getElementById("ion");
  const plot = document.getElementById("spectrum");
  const mzInput = document.getElementById("mz");
  const tolInput = document.getElementById("tol");
  const view = { meta: null, image: null, clip: null, spectrum: null, pixel: null, drawn: 0 };
  const MARGIN = { left: 60, right: 12, top: 10, bottom: 34 };

  async function open(meta) {
    view.meta = meta;
    view.spectrum = null;
    mzInput.value = String(meta.default_mz);
    clearPlot();
    await ionImage();
  }

  async function ionImage() {
    const query = new URLSearchParams({ mz: mzInput.value, tol: tolInput.value });
    const response = await api(`api/stores/${state.store}/ion-image?${query}`);
    const [nx, ny] = JSON.parse(response.headers.get("x-plane")).shape;
    view.image = { values: new Float32Array(await response.arrayBuffer()), nx, ny, mz: Number(mzInput.value) };
    drawImage();
  }

  // x across, y down, as imzML numbers pixels.
  function drawImage() {
    const { values, nx, ny, mz } = view.image;
    const table = lut(state.colormap === "seismic" ? "viridis" : state.colormap);
    view.clip = clipOf(values, state.clip, false);
    const [lo, hi] = view.clip;
    const image = new ImageData(nx, ny);
    for (let i = 0; i < nx; i++) {
      for (let j = 0; j < ny; j++) {
        const v = values[i * ny + j];
        if (!Number.isFinite(v)) continue;
        const at = 4 * (j * nx + i);
        const k = Math.round(Math.min(1, Math.max(0, (v - lo) / (hi - lo))) * 255) * 3;
        image.data.set([table[k], table[k + 1], table[k + 2], 255], at);
      }
    }
    const native = new OffscreenCanvas(nx, ny);
    native.getContext("2d").putImageData(image, 0, 0);
    const context = ion.getContext("2d");
    context.imageSmoothingEnabled = false;
    context.clearRect(0, 0, ion.width, ion.height);
    context.drawImage(native, 0, 0, ion.width, ion.height);
    document.getElementById("ion-title").textContent = `ion image, m/z ${mz} ± ${tolInput.value}`;
    view.drawn++;
  }

  function clearPlot() {
    plot.getContext("2d").clearRect(0, 0, plot.width, plot.height);
  }

  async function showSpectrum(i, j) {
    const x = view.meta.labels[view.meta.dims[0]][i];
    const y = view.meta.labels[view.meta.dims[1]][j];
    const response = await api(`api/stores/${state.store}/spectrum?x=${x}&y=${y}`);
    view.spectrum = new Float32Array(await response.arrayBuffer());
    view.pixel = [x, y];
    drawPlot();
  }

  function drawPlot() {
    const mz = view.meta.labels[view.meta.dims[2]];
    const values = view.spectrum;
    const context = plot.getContext("2d");
    const width = plot.width - MARGIN.left - MARGIN.right;
    const height = plot.height - MARGIN.top - MARGIN.bottom;
    const [m0, m1] = [mz[0], mz[mz.length - 1]];
    let top = 0;
    for (const v of values) if (Number.isFinite(v) && v > top) top = v;
    top = top || 1;
    const px = (m) => MARGIN.left + ((m - m0) / (m1 - m0 || 1)) * width;
    const py = (v) => MARGIN.top + height - (v / top) * height;
    context.clearRect(0, 0, plot.width, plot.height);
    context.strokeStyle = "#888";
    context.strokeRect(MARGIN.left, MARGIN.top, width, height);
    context.fillStyle = "#ddd";
    context.font = "11px sans-serif";
    context.textAlign = "center";
    for (let t = 0; t <= 5; t++) {
      const m = m0 + ((m1 - m0) * t) / 5;
      context.fillText(m.toFixed(1), px(m), plot.height - MARGIN.bottom + 14);
    }
    context.fillText("m/z", MARGIN.left + width / 2, plot.height - 4);
    context.textAlign = "right";
    context.fillText(top.toPrecision(3), MARGIN.left - 4, MARGIN.top + 8);
    context.fillText("0", MARGIN.left - 4, MARGIN.top + height);
    context.strokeStyle = "#4a90d9";
    context.beginPath();
    values.forEach((v, k) => {
      const y = py(Number.isFinite(v) ? v : 0);
      if (k === 0) context.moveTo(px(mz[k]), y);
      else context.lineTo(px(mz[k]), y);
    });
    context.stroke();
    context.strokeStyle = "rgba(255, 215, 0, 0.8)"; // the ion image's m/z
    context.beginPath();
    context.moveTo(px(view.image.mz), MARGIN.top);
    context.lineTo(px(view.image.mz), MARGIN.top + height);
    context.stroke();
    document.getElementById("spectrum-title").textContent = `spectrum at x=${view.pixel[0]}, y=${view.pixel[1]}`;
  }

  ion.addEventListener("click", (event) => {
    const rect = ion.getBoundingClientRect();
    const i = Math.min(view.image.nx - 1, Math.floor(((event.clientX - rect.left) / rect.width) * view.image.nx));
    const j = Math.min(view.image.ny - 1, Math.floor(((event.clientY - rect.top) / rect.height) * view.image.ny));
    showSpectrum(i, j);
  });
  plot.addEventListener("click", (event) => {
    if (!view.spectrum) return;
    const mz = view.meta.labels[view.meta.dims[2]];
    const rect = plot.getBoundingClientRect();
    const f = (event.clientX - rect.left - MARGIN.left) / (plot.width - MARGIN.left - MARGIN.right);
    if (f < 0 || f > 1) return;
    mzInput.value = (mz[0] + f * (mz[mz.length - 1] - mz[0])).toFixed(4);
    ionImage().then(drawPlot);
  });
  mzInput.addEventListener("change", () => ionImage().then(() => view.spectrum && drawPlot()));
  tolInput.addEventListener("change", () => ionImage());

  return { open, view, redraw: () => view.image && drawImage() };
})();

window.msiView = msiView;
