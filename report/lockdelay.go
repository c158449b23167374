package report

import (
	"fmt"
	"html/template"
	"io"
	"time"

	"github.com/leasefence/lab/history"
)

// LockDelayTable writes a lock-delay sweep (the harness's SweepLockDelay) as
// one table: a row per lock-delay, and for naive (a resource that cannot
// check a fence: every write lands) and fenced the stale writes that
// landed, the idle time while someone waited, and the writes that landed,
// each summed over the seeds.
func LockDelayTable(w io.Writer, scenario string, seeds int, runFor time.Duration, rows []history.LockDelayRow) {
	w = history.PrintableWriter(w)
	fmt.Fprintf(w, "%s · lock-delay sweep · %s of %s each, counts summed\n\n", scenario,
		history.Plural(seeds, "seed", "seeds"), history.FormatDuration(runFor))
	fmt.Fprintf(w, "  %-10s  %-36s  %s\n", "", "naive (the resource cannot check)", "fenced (the gate checks)")
	fmt.Fprintf(w, "  %-10s  %6s %10s %8s  %9s  %6s %10s %8s\n", "lock-delay", "stale", "idle", "writes", "", "stale", "idle", "writes")
	for _, r := range rows {
		n, f := r.Modes[history.Naive], r.Modes[history.Fenced]
		fmt.Fprintf(w, "  %-10s  %6d %10s %8d  %9s  %6d %10s %8d\n", r.LockDelay,
			n.StaleWritesLanded, idle(n.IdleWhileWaitingMS), n.CommitsAdmitted, "",
			f.StaleWritesLanded, idle(f.IdleWhileWaitingMS), f.CommitsAdmitted)
	}
	fmt.Fprint(w, `
stale: writes that landed after a newer lease's write (stale_writes_landed).
idle: how long the resource sat with no live lease while an acquirer the
coordinator refused for lock-delay waited (idle_while_waiting_ms).
writes: the writes that landed (commits_admitted): the work done.
`)
}

func idle(ms int) string {
	return history.FormatDuration(time.Duration(ms) * time.Millisecond)
}

// LockDelayHTML writes the sweep as a self-contained page: the table of
// LockDelayTable and one plot of the trade-off, a point per lock-delay
// (evenly spaced), the naive stale writes and the idle time each scaled
// to its own maximum.
func LockDelayHTML(w io.Writer, scenario string, seeds int, runFor time.Duration, rows []history.LockDelayRow) error {
	type point struct{ X, StaleY, IdleY float64 }
	type row struct {
		Delay                 string
		N, F                  history.LockDelayCounts
		NaiveIdle, FencedIdle string
	}
	var maxStale, maxIdle int
	for _, r := range rows {
		maxStale = max(maxStale, r.Modes[history.Naive].StaleWritesLanded)
		maxIdle = max(maxIdle, r.Modes[history.Naive].IdleWhileWaitingMS)
	}
	const width, height, pad = 560.0, 220.0, 30.0
	scale := func(v, top int) float64 {
		if top == 0 {
			return height - pad
		}
		return height - pad - float64(v)/float64(top)*(height-2*pad)
	}
	data := struct {
		Title                 string
		Rows                  []row
		Points                []point
		StaleLine, IdleLine   string
		Width, Height, Bottom float64
		MaxStale              int
		MaxIdle               string
	}{Title: fmt.Sprintf("%s · lock-delay sweep · %s of %s each, counts summed", scenario,
		history.Plural(seeds, "seed", "seeds"), history.FormatDuration(runFor)),
		Width: width, Height: height, Bottom: height - pad, MaxStale: maxStale, MaxIdle: idle(maxIdle)}
	for i, r := range rows {
		n, f := r.Modes[history.Naive], r.Modes[history.Fenced]
		data.Rows = append(data.Rows, row{Delay: r.LockDelay.String(), N: n, F: f,
			NaiveIdle: idle(n.IdleWhileWaitingMS), FencedIdle: idle(f.IdleWhileWaitingMS)})
		x := pad
		if len(rows) > 1 {
			x += float64(i) / float64(len(rows)-1) * (width - 2*pad)
		}
		p := point{X: x, StaleY: scale(n.StaleWritesLanded, maxStale), IdleY: scale(n.IdleWhileWaitingMS, maxIdle)}
		data.Points = append(data.Points, p)
		data.StaleLine += fmt.Sprintf("%.1f,%.1f ", p.X, p.StaleY)
		data.IdleLine += fmt.Sprintf("%.1f,%.1f ", p.X, p.IdleY)
	}
	return lockDelayPage.Execute(w, data)
}

var lockDelayPage = template.Must(template.New("lockdelay").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:right;border-bottom:1px solid #ddd}
.stale{stroke:#c0392b}.idle{stroke:#2471a3}polyline{fill:none;stroke-width:2}</style></head>
<body><h1>{{.Title}}</h1>
<table><tr><th></th><th colspan="3">naive (the resource cannot check)</th><th colspan="3">fenced (the gate checks)</th></tr>
<tr><th>lock-delay</th><th>stale</th><th>idle</th><th>writes</th><th>stale</th><th>idle</th><th>writes</th></tr>
{{range .Rows}}<tr><td>{{.Delay}}</td><td>{{.N.StaleWritesLanded}}</td><td>{{.NaiveIdle}}</td><td>{{.N.CommitsAdmitted}}</td><td>{{.F.StaleWritesLanded}}</td><td>{{.FencedIdle}}</td><td>{{.F.CommitsAdmitted}}</td></tr>
{{end}}</table>
<h2>The trade-off, naive</h2>
<svg width="{{.Width}}" height="{{.Height}}" role="img" aria-label="stale writes and idle time per lock-delay">
<line x1="30" y1="{{.Bottom}}" x2="{{.Width}}" y2="{{.Bottom}}" stroke="#999"/>
<polyline class="stale" points="{{.StaleLine}}"/><polyline class="idle" points="{{.IdleLine}}"/>
{{range $i, $p := .Points}}<text x="{{$p.X}}" y="{{$.Height}}" font-size="11" text-anchor="middle">{{(index $.Rows $i).Delay}}</text>{{end}}
</svg>
<p><span style="color:#c0392b">stale writes landed</span> (top: {{.MaxStale}}) and <span style="color:#2471a3">idle while waiting</span> (top: {{.MaxIdle}}), each scaled to its largest, per lock-delay.</p>
<p>stale: writes that landed after a newer lease's write (stale_writes_landed). idle: how long the resource sat with no live lease while an acquirer the coordinator refused for lock-delay waited (idle_while_waiting_ms). writes: the writes that landed (commits_admitted).</p>
</body></html>
`))
