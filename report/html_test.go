package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// renderPage runs a built-in with the timeline recorder and returns the
// page and the result.
func renderPage(t *testing.T, name string, change func(*spec.Scenario)) ([]byte, *history.Result) {
	t.Helper()
	sc, ok := spec.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	if change != nil {
		change(&sc)
	}
	rec := NewTimeline(sc.Header(harness.Modes))
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := HTML(&b, res, rec, Stop{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), res
}

// page is a parsed page, indexed for the checks.
type page struct {
	byID  map[string]*html.Node
	nodes []*html.Node
}

func parsePage(t *testing.T, b []byte) page {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	p := page{byID: make(map[string]*html.Node)}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			p.nodes = append(p.nodes, n)
			if id := attr(n, "id"); id != "" {
				if _, dup := p.byID[id]; dup {
					t.Errorf("id %q is used twice", id)
				}
				p.byID[id] = n
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return p
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
}

// within returns the elements with class class under the element of id.
func (p page) within(id, class string) []*html.Node {
	root := p.byID[id]
	var out []*html.Node
	for _, n := range p.nodes {
		if !hasClass(n, class) {
			continue
		}
		for a := n.Parent; a != nil; a = a.Parent {
			if a == root {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// TestHTMLStructure checks the page a run makes by its HTML: a timeline per
// mode with one lane per agent, one mark per write of the right kind, and
// links that resolve.
func TestHTMLStructure(t *testing.T) {
	for _, name := range []string{"gap", "overlap", "partition", "restart-lost", "push"} {
		t.Run(name, func(t *testing.T) {
			b, res := renderPage(t, name, nil)
			p := parsePage(t, b)
			sc, _ := spec.Builtin(name)
			for _, m := range harness.Modes {
				rep := res.Modes[m]
				svg := "timeline-" + string(m)
				if p.byID[svg] == nil {
					t.Fatalf("no %s", svg)
				}
				lanes := p.within(svg, "lane")
				if len(lanes) != sc.Agents {
					t.Errorf("%s: %d lanes, want one per agent (%d)", m, len(lanes), sc.Agents)
				}
				for i, lane := range lanes {
					if got, want := attr(lane, "data-agent"), spec.AgentName(i); got != want {
						t.Errorf("%s: lane %d is %q, want %q", m, i, got, want)
					}
				}
				admitted := len(p.within(svg, "mark-admitted"))
				stale := len(p.within(svg, "mark-stale"))
				refused := len(p.within(svg, "mark-refused"))
				if admitted+stale != rep.CommitsAdmitted || stale != rep.StaleWritesLanded || refused != rep.CommitsRefused {
					t.Errorf("%s: marks admitted %d, stale %d, refused %d; report admitted %d, stale %d, refused %d",
						m, admitted, stale, refused, rep.CommitsAdmitted, rep.StaleWritesLanded, rep.CommitsRefused)
				}
				if rep.CommitsRefused+rep.StaleWritesLanded > 0 && len(p.within(svg, "link")) == 0 {
					t.Errorf("%s: refusals but no link lines", m)
				}
			}
			links := 0
			for _, n := range p.nodes {
				href := attr(n, "href")
				if !strings.HasPrefix(href, "#") {
					if href != "" {
						t.Errorf("link %q leaves the page", href)
					}
					continue
				}
				links++
				if p.byID[href[1:]] == nil {
					t.Errorf("link %q resolves to no element", href)
				}
			}
			if links == 0 {
				t.Error("no links")
			}
			// Self-contained: the one script is inline, and nothing is
			// loaded from anywhere.
			scripts := 0
			for _, n := range p.nodes {
				if n.Data == "script" {
					scripts++
				}
				if attr(n, "src") != "" || (n.Data == "link" && attr(n, "rel") == "stylesheet") {
					t.Errorf("external content: <%s src=%q href=%q>", n.Data, attr(n, "src"), attr(n, "href"))
				}
			}
			if scripts != 1 {
				t.Errorf("%d scripts, want the one inline zoom script", scripts)
			}
			if p.byID["legend"] == nil || p.byID["verdict"] == nil || p.byID["counters"] == nil {
				t.Error("the legend, verdict or counters are missing")
			}
		})
	}
}

// TestHTMLRefusalLinksToFloorWrite checks the gap's one refusal: agent-1's
// write with fence 1 links to agent-2's write with fence 2, which raised
// the floor.
func TestHTMLRefusalLinksToFloorWrite(t *testing.T) {
	b, _ := renderPage(t, "gap", nil)
	p := parsePage(t, b)
	refused := p.within("timeline-fenced", "mark-refused")
	if len(refused) != 1 {
		t.Fatalf("%d refused marks, want 1", len(refused))
	}
	link := attr(refused[0].Parent, "href")
	target := p.byID[strings.TrimPrefix(link, "#")]
	if target == nil || !hasClass(target, "mark-admitted") {
		t.Fatalf("the refusal links to %q, not to an admitted write", link)
	}
	title := textOf(target)
	if !strings.Contains(title, "agent-2 wrote res-1 with fence 2 at 1.010s") {
		t.Errorf("the floor write is %q", title)
	}
	if !strings.Contains(textOf(refused[0]), "agent-1 wrote res-1 with fence 1 at 1.400s: REFUSED") {
		t.Errorf("the refused write is %q", textOf(refused[0]))
	}
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// browserPage is the page of the default scenario in a headless Chromium
// 1400x900 (the test is skipped without one): open loads it, with query
// added to its URL and the browser's own flags, and returns its stdout.
type browserPage struct {
	t                      *testing.T
	browser, dir, pagePath string
	page                   []byte
}

func newBrowserPage(t *testing.T) *browserPage {
	bp := &browserPage{t: t, dir: t.TempDir()}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bp.browser = p
			break
		}
	}
	if bp.browser == "" {
		t.Skip("no headless browser: install Debian's chromium (apt-get install -y chromium) to run this test")
	}
	bp.page, _ = renderPage(t, spec.DefaultScenario, nil)
	bp.pagePath = filepath.Join(bp.dir, "report.html")
	if err := os.WriteFile(bp.pagePath, bp.page, 0o644); err != nil {
		t.Fatal(err)
	}
	return bp
}

const browserWindow = 1400

func (bp *browserPage) open(query string, flags ...string) []byte {
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir=" + filepath.Join(bp.dir, "profile"), fmt.Sprintf("--window-size=%d,900", browserWindow)}, flags...)
	cmd := exec.CommandContext(bp.t.Context(), bp.browser, append(args, "file://"+bp.pagePath+query)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		bp.t.Fatalf("%s: %v\n%s", bp.browser, err, stderr.String())
	}
	return out
}

// TestHTMLFitsAndZooms loads the page of a 60s run in a real headless
// browser 1400 pixels wide and reads the page as its script left it: by
// default each timeline fits the window, with axis labels at least
// minTickGap apart; ?zoom=4 draws it four times as wide, with finer labels,
// still minTickGap apart.
func TestHTMLFitsAndZooms(t *testing.T) {
	bp := newBrowserPage(t)
	const window = browserWindow
	type view struct {
		width int
		ticks []float64 // x of the labels shown
	}
	load := func(query string) view {
		p := parsePage(t, bp.open(query, "--dump-dom"))
		svg := p.byID["timeline-fenced"]
		if svg == nil {
			t.Fatal("no fenced timeline")
		}
		var v view
		v.width, _ = strconv.Atoi(attr(svg, "width"))
		for n := range svg.Descendants() {
			if n.Data == "text" && strings.Contains(attr(n, "class"), "tick") && strings.Contains(attr(n, "style"), "inline") {
				x, _ := strconv.ParseFloat(attr(n, "x"), 64)
				v.ticks = append(v.ticks, x)
			}
		}
		return v
	}
	fit, zoomed := load(""), load("?zoom=4")
	if fit.width > window || fit.width < window/2 {
		t.Errorf("the fitted timeline is %dpx wide in a %dpx window", fit.width, window)
	}
	const plot = laneLabelW + 36
	if got, want := float64(zoomed.width-plot), 4*float64(fit.width-plot); math.Abs(got-want) > 2 {
		t.Errorf("at zoom 4 the plot is %.0fpx wide, want 4 x %dpx", got, fit.width-plot)
	}
	for name, v := range map[string]view{"fitted": fit, "zoomed": zoomed} {
		if len(v.ticks) < 3 {
			t.Errorf("%s: %d axis labels shown", name, len(v.ticks))
		}
		for i := 1; i < len(v.ticks); i++ {
			if gap := v.ticks[i] - v.ticks[i-1]; gap < minTickGap-0.5 {
				t.Errorf("%s: axis labels %.1fpx apart, want at least %d", name, gap, minTickGap)
				break
			}
		}
	}
	if len(zoomed.ticks) <= len(fit.ticks) {
		t.Errorf("zoomed in, %d axis labels; fitted, %d: want finer labels", len(zoomed.ticks), len(fit.ticks))
	}
}

// TestHTMLInBrowser renders a page in a real headless browser and checks
// the screenshot is a real picture: it decodes, has the window's size, and
// is not one blank colour. With -update it keeps the screenshot as
// testdata/report.png, the picture in docs/lab.md.
func TestHTMLInBrowser(t *testing.T) {
	bp := newBrowserPage(t)
	shot := filepath.Join(bp.dir, "report.png")
	bp.open("", "--screenshot="+shot)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{browserWindow, 900}) {
		t.Errorf("screenshot is %v, want 1400x900", got)
	}
	colours := make(map[[3]uint32]int)
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 3 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}]++
		}
	}
	// A blank or unstyled page has a handful of colours; the timelines'
	// states, patterns and marks have dozens.
	if len(colours) < 40 {
		t.Errorf("the screenshot has %d colours: the page did not render", len(colours))
	}
	if *update {
		if err := os.WriteFile("testdata/report.png", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(screenshotStamp, []byte(pageDigest(bp.page)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// screenshotStamp holds the digest of the page testdata/report.png (the
// docs/lab.md's picture) was taken of.
const screenshotStamp = "testdata/report.png.page-sha256"

func pageDigest(page []byte) string {
	sum := sha256.Sum256(page)
	return hex.EncodeToString(sum[:])
}

// TestReadmeScreenshotIsCurrent fails once the page of the default
// scenario is no longer the one docs/lab.md's screenshot shows: it needs
// no browser, so every test run catches a stale picture, and says how to
// take a new one.
func TestReadmeScreenshotIsCurrent(t *testing.T) {
	b, _ := renderPage(t, spec.DefaultScenario, nil)
	stamp, err := os.ReadFile(screenshotStamp)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pageDigest(b), strings.TrimSpace(string(stamp)); got != want {
		t.Errorf("testdata/report.png, docs/lab.md's picture, shows another page than lab run %s --html draws now (page sha256 %s, picture of %s): "+
			"retake it with Debian's chromium installed: go test ./report -run TestHTMLInBrowser -update", spec.DefaultScenario, got, want)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/report.png from a browser's screenshot")

// A page of a long run draws a window of each mode, its first events, and
// counts what came after: the marks it draws are the window's writes, its
// axis ends where the window does, it says what it left out, and the
// timeline holds nothing of what came after.
func TestHTMLDrawsAWindowOfALongRun(t *testing.T) {
	defer func(n int) { pageEvents = n }(pageEvents)
	pageEvents = 3000
	sc, _ := spec.Builtin("crowd")
	sc.Agents, sc.Resources, sc.Duration = 20, 4, 60*time.Second
	rec := NewTimeline(sc.Header(harness.Modes))
	var windowWrites, allWrites int
	var last time.Duration
	count := history.SubscriberFunc(func(e history.Event) {
		if e.Mode != history.Fenced {
			return
		}
		switch e.Kind {
		case history.CommitAdmitted, history.CommitRefused:
			allWrites++
			if rec.modes[e.Mode].after.events == 0 { // the timeline, before this subscriber, drew it
				windowWrites++
			}
		}
		last = e.At
	})
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Modes: []history.Mode{history.Fenced}, Subscribers: []history.Subscriber{rec, count}})
	if err != nil {
		t.Fatal(err)
	}
	mt := rec.modes[history.Fenced]
	if int(res.Events) <= 2*pageEvents || mt.drawn != pageEvents || mt.after.events != int(res.Events)-pageEvents {
		t.Fatalf("%d events, %d drawn, %d after the window", res.Events, mt.drawn, mt.after.events)
	}
	if len(mt.writes) != windowWrites || mt.after.writes != allWrites-windowWrites || mt.window <= 0 || mt.window > last {
		t.Fatalf("%d writes kept, %d after the window (of %d, %d in the window); window from %v",
			len(mt.writes), mt.after.writes, allWrites, windowWrites, mt.window)
	}
	var b bytes.Buffer
	if err := HTML(&b, res, rec, Stop{}); err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, b.Bytes())
	svg := "timeline-" + string(history.Fenced)
	marks := len(p.within(svg, "mark-admitted")) + len(p.within(svg, "mark-stale")) + len(p.within(svg, "mark-refused"))
	if marks != windowWrites {
		t.Errorf("%d marks drawn, want the window's %d writes", marks, windowWrites)
	}
	if got, want := attr(p.byID[svg], "data-ns"), strconv.FormatInt(int64(mt.window), 10); got != want {
		t.Errorf("the axis spans %s ns, want the window's %s", got, want)
	}
	note := fmt.Sprintf("This timeline draws the first %s of the mode (its first %d events). After it, %s",
		history.FormatDuration(mt.window), pageEvents, history.Plural(allWrites-windowWrites, "write", "writes"))
	if !strings.Contains(b.String(), note) {
		t.Errorf("the page does not say what it left out: want %q", note)
	}
}

// A lock that granted a resource while an earlier lease on it still ran
// shows it on the timeline, a band on the new holder's lane, and in a
// table with its evidence, and the page's verdict is a failure: here a
// user's lock that granted res-1 twice.
func TestHTMLShowsMutualExclusionViolations(t *testing.T) {
	h, events, err := history.ReadFile("../history/testdata/lock_grants_twice.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rec := NewTimeline(h)
	for _, e := range events {
		rec.Event(e)
	}
	res := history.Check(h, events)
	var page bytes.Buffer
	if err := HTML(&page, res, rec, Stop{}); err != nil {
		t.Fatal(err)
	}
	b := page.Bytes()
	p := parsePage(t, b)
	if v := p.byID["verdict"]; v == nil || !strings.Contains(attr(v, "class"), "failed") ||
		!strings.Contains(textOf(v), "BROKE ITS INVARIANTS") || strings.Contains(textOf(v), "held") {
		t.Errorf("the page's verdict on a lock that granted twice: %q", textOf(v))
	}
	for m, rep := range res.Modes {
		bands := p.within("timeline-"+string(m), "exclusion")
		if rep.MutualExclusionViolations == 0 {
			if len(bands) != 0 {
				t.Errorf("%s: %d bands with no violation", m, len(bands))
			}
			continue
		}
		if len(bands) == 0 {
			t.Fatalf("%s: %d violations, none on the timeline", m, rep.MutualExclusionViolations)
		}
		row := p.byID[attr(bands[0], "id")+"-row"]
		if row == nil || !strings.Contains(textOf(bands[0]), "was neither released nor expired") {
			t.Errorf("%s: the band %q has no evidence row or title", m, attr(bands[0], "id"))
		}
	}
	if res.Modes["lock"].MutualExclusionViolations == 0 {
		t.Fatal("the history no longer breaks mutual exclusion")
	}
}
