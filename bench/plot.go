package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// libColors: dlock in strong colours, peers in muted ones, the floor in grey.
var libColors = map[string]color.RGBA{
	libDlock:       {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	libDlockFair:   {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	libRedsync:     {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	libRedislock:   {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	libRueidislock: {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	libSetNX:       {R: 0x55, G: 0x55, B: 0x55, A: 0xff}, // grey
}

// minWaitMs is where the log axis starts: shorter waits are drawn there.
const minWaitMs = 0.01

// waitsByLib pools the waits (ms) of every run of the hot-key and fair scenarios, over
// the same window as the metrics.
func waitsByLib(r *report) map[string][]float64 {
	out := map[string][]float64{}
	cfg := r.Config
	warm := min(cfg.Duration/10, 500e6)
	for _, x := range r.Results {
		// Not fair-1proc: the plot shows one shape, 16 goroutines in 4 processes.
		if (x.Scenario != scHotKey && x.Scenario != scFair) || len(x.Samples) == 0 {
			continue
		}
		// The window: from the first request plus the warm-up to the first request plus
		// the duration (the workers start together).
		first := int64(math.MaxInt64)
		for _, s := range x.Samples {
			first = min(first, s.Req)
		}
		from, to := first+int64(warm), first+int64(cfg.Duration)
		for _, s := range x.Samples {
			if s.Acq != 0 && s.Req >= from && s.Req < to {
				out[x.Lib] = append(out[x.Lib], max(float64(s.Acq-s.Req)/1e6, minWaitMs))
			}
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// drawWaits draws the wait-time distributions of the hot-key scenario: the CDF on a log
// time axis, and the tail (1 - CDF) on log-log axes.
func drawWaits(path string, r *report) error {
	waits := waitsByLib(r)
	if len(waits) == 0 {
		return fmt.Errorf("no hot-key samples to draw (run the hotkey or fair scenario)")
	}
	ideal := float64(r.Config.fifoIdeal()) / 1e6
	maxWait := minWaitMs * 10
	for _, v := range waits {
		maxWait = max(maxWait, v[len(v)-1])
	}

	cdf := plot.New()
	cdf.Title.Text = fmt.Sprintf("Wait for the lock: CDF (%d goroutines, %d processes, %v hold)",
		r.Config.HotWorkers*r.Config.HotGoroutines, r.Config.HotWorkers, r.Config.Hold)
	cdf.X.Label.Text = "wait, ms (log scale)"
	cdf.Y.Label.Text = "share of grants with wait ≤ x"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.X.Min, cdf.X.Max = minWaitMs, maxWait*1.2
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Add(plotter.NewGrid())

	tail := plot.New()
	tail.Title.Text = "Tail: share of grants with wait > x"
	tail.X.Label.Text = "wait, ms (log scale)"
	tail.Y.Label.Text = "share (log scale)"
	tail.X.Scale, tail.Y.Scale = plot.LogScale{}, plot.LogScale{}
	tail.X.Tick.Marker, tail.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	tail.X.Min, tail.X.Max = minWaitMs, maxWait*1.2
	minShare := 1.0
	for _, v := range waits {
		minShare = min(minShare, 1/float64(len(v)))
	}
	tail.Y.Min, tail.Y.Max = math.Pow(10, math.Floor(math.Log10(minShare))), 1
	tail.Add(plotter.NewGrid())

	for _, pl := range []*plot.Plot{cdf, tail} {
		for _, x := range []float64{ideal, 2 * ideal} {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: yMin(pl)}, {X: x, Y: 1}})
			if err != nil {
				return err
			}
			l.Color = color.Gray{Y: 0x80}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			pl.Add(l)
		}
		pl.Legend.Top = true
		pl.Legend.Left = pl == cdf
		pl.Legend.TextStyle.Font.Size = vg.Points(11)
		pl.Title.TextStyle.Font.Size = vg.Points(13)
		pl.X.Label.TextStyle.Font.Size = vg.Points(11)
		pl.Y.Label.TextStyle.Font.Size = vg.Points(11)
	}

	// Name the dashed lines, at the bottom of the CDF (where the curves have not yet risen).
	names, err := plotter.NewLabels(plotter.XYLabels{
		XYs:    []plotter.XY{{X: ideal / 1.06, Y: 0.03}, {X: 2 * ideal * 1.06, Y: 0.03}},
		Labels: []string{fmt.Sprintf("FIFO ideal %.0f ms", ideal), fmt.Sprintf("p99 goal %.0f ms", 2*ideal)},
	})
	if err != nil {
		return err
	}
	for i := range names.TextStyle {
		names.TextStyle[i].Font.Size = vg.Points(10)
		names.TextStyle[i].Color = color.Gray{Y: 0x50}
	}
	names.TextStyle[0].XAlign = draw.XRight // left of its line; the other right of its own
	cdf.Add(names)

	for _, l := range libraries {
		v := waits[l.ID]
		if len(v) == 0 {
			continue
		}
		n := float64(len(v))
		p50, p99 := quantile(v, 0.5), quantile(v, 0.99)
		var up, down plotter.XYs
		// At most ~2000 points per curve: every distinct step would be too many.
		step := max(1, len(v)/2000)
		for i := 0; i < len(v); i += step {
			up = append(up, plotter.XY{X: v[i], Y: float64(i+1) / n})
			if f := 1 - float64(i+1)/n; f > 0 {
				down = append(down, plotter.XY{X: v[i], Y: f})
			}
		}
		up = append(up, plotter.XY{X: v[len(v)-1], Y: 1})
		down = append(down, plotter.XY{X: v[len(v)-1], Y: 1 / n})
		label := fmt.Sprintf("%s (p50 %.1f, p99 %.1f, max %.0f ms)", l.Label, p50, p99, v[len(v)-1])
		for i, xys := range []plotter.XYs{up, down} {
			line, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			line.Color = libColors[l.ID]
			line.Width = vg.Points(1.5)
			if !l.Peer {
				line.Width = vg.Points(2.5)
			}
			if i == 0 {
				cdf.Add(line)
				cdf.Legend.Add(label, line)
			} else {
				tail.Add(line)
				tail.Legend.Add(l.Label, line)
			}
		}
	}

	const w, h = 16 * vg.Inch, 6.5 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(15)}
	canvases := plot.Align([][]*plot.Plot{{cdf, tail}}, tiles, dc)
	cdf.Draw(canvases[0][0])
	tail.Draw(canvases[0][1])

	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func yMin(p *plot.Plot) float64 {
	if p.Y.Min > 0 {
		return p.Y.Min
	}
	return 0
}
