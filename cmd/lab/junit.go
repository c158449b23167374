package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
)

// The JUnit XML schema as CI systems read it (Jenkins, GitLab, GitHub
// reporters): one testsuite "lab fixtures", one testcase per fixture file;
// a failed expectation is a <failure>, a file that does not load or a run
// that stopped early an <error>.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// writeJUnit writes the JUnit report of the fixture files that ran.
func writeJUnit(w io.Writer, runs []*fixtureRun, elapsed time.Duration) error {
	suite := junitSuite{Name: "lab fixtures", Time: seconds(elapsed)}
	for _, r := range runs {
		c := junitCase{Name: r.name(), Classname: "fixtures", File: r.file, Time: seconds(0)}
		switch {
		case r.skipped != nil:
			c.Skipped = &junitProblem{Message: "not on the backend asked for", Type: "skipped", Text: r.skipped.Error()}
		case r.loadErr != nil:
			c.Error = &junitProblem{Message: "the fixture file does not load", Type: "broken", Text: r.loadErr.Error()}
			suite.Errors++
		default:
			o := r.outcome
			c.Time = seconds(o.Elapsed)
			c.SystemOut = fmt.Sprintf("%s: %s over %s", r.fixture.Name, history.Plural(len(r.fixture.Expect), "expectation", "expectations"), seedsText(r.fixture.Seeds))
			if o.Err != nil {
				c.Error = &junitProblem{Message: o.Err.Error(), Type: "incomplete",
					Text: ofSeeds(len(o.Seeds), len(r.fixture.Seeds)) + " ran"}
				suite.Errors++
			} else if failures := o.Failures(); len(failures) > 0 {
				var text strings.Builder
				for _, f := range failures {
					fmt.Fprintf(&text, "%s:%d: %s\n", r.file, f.Expectation.Line, f)
				}
				c.Failure = &junitProblem{Message: history.Plural(len(failures), "failed expectation", "failed expectations"), Type: "expectation", Text: text.String()}
				suite.Failures++
			}
		}
		suite.Cases = append(suite.Cases, c)
		suite.Tests++
	}
	doc := junitSuites{Name: "lab fixtures", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors,
		Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
