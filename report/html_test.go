package report

import (
	"bytes"
	"flag"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasefence/lab/harness"
)

// renderPage runs a built-in with the timeline recorder and returns the
// page and the result.
func renderPage(t *testing.T, name string, change func(*harness.Scenario)) ([]byte, *harness.Result) {
	t.Helper()
	sc, ok := harness.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	if change != nil {
		change(&sc)
	}
	rec := NewTimeline(sc.Header(harness.Modes))
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []harness.Subscriber{rec}})
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
			sc, _ := harness.Builtin(name)
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
					if got, want := attr(lane, "data-agent"), harness.AgentName(i); got != want {
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
			for _, n := range p.nodes {
				if n.Data == "script" || (n.Data == "link" && attr(n, "rel") == "stylesheet") || strings.HasPrefix(attr(n, "src"), "http") {
					t.Errorf("external or scripted content: <%s>", n.Data)
				}
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
	if !strings.Contains(title, "agent-2 wrote res-1 with fence 2 at 1010ms") {
		t.Errorf("the floor write is %q", title)
	}
	if !strings.Contains(textOf(refused[0]), "agent-1 wrote res-1 with fence 1 at 1400ms: REFUSED") {
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

// TestHTMLInBrowser renders a page in a real headless browser and checks
// the screenshot is a real picture: it decodes, has the window's size, and
// is not one blank colour. With -update it keeps the screenshot as
// testdata/report.png, the picture in the README.
func TestHTMLInBrowser(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no headless browser: install Debian's chromium (apt-get install -y chromium) to run this test")
	}
	b, _ := renderPage(t, harness.DefaultScenario, nil)
	dir := t.TempDir()
	pagePath := filepath.Join(dir, "report.html")
	if err := os.WriteFile(pagePath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	cmd := exec.CommandContext(t.Context(), browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1400,900",
		"file://"+pagePath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, out)
	}
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{1400, 900}) {
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
	}
}

var update = flag.Bool("update", false, "rewrite testdata/report.png from a browser's screenshot")
