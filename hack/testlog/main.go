// Command testlog filters `go test -json` into what `go test` prints without -v, plus every
// skipped test with its reason, so a log shows what did not run and why:
//
//	go test -json ./... 2>&1 | go run ./hack/testlog
//
// Per package, once it ends, it prints each skipped or failed test's "--- SKIP"/"--- FAIL" line
// followed by that test's output, then the package's "ok"/"?" line (all of its output if it
// failed). Build errors and lines that are not test events pass through. It ends as go test
// does: with the last package's line, then "FAIL" if any package failed. It exits 0 unless it
// cannot read its input; the Makefile keeps go test's exit code.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action, Package, Test, Output string
}

func main() {
	if err := filter(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(1)
	}
}

func filter(in io.Reader, out io.Writer) error {
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	type test struct{ pkg, name string }
	running := map[test][]string{}  // output of each test (name "": the package's own) so far
	report := map[string][]string{} // per package: what it prints when it ends
	var pkgs []string               // packages in the order they started
	var tests []test                // tests in the order they started
	failed := false
	// end moves t's output to its package's report, its "--- SKIP:"/"--- FAIL:" line first.
	end := func(t test, header string) {
		lines := running[t]
		delete(running, t)
		for i, l := range lines {
			if header != "" && strings.HasPrefix(l, header) {
				lines = append([]string{l}, append(lines[:i:i], lines[i+1:]...)...)
				break
			}
		}
		report[t.pkg] = append(report[t.pkg], lines...)
	}
	for {
		line, err := r.ReadString('\n')
		var e event
		switch {
		case line == "":
		case json.Unmarshal([]byte(line), &e) != nil || e.Action == "":
			w.WriteString(line) // not a test event: an error of go itself, say
		case e.Action == "build-output":
			w.WriteString(e.Output)
		default:
			t := test{e.Package, e.Test}
			if _, seen := report[e.Package]; !seen {
				report[e.Package] = []string{}
				pkgs = append(pkgs, e.Package)
			}
			switch e.Action {
			case "output":
				if _, ok := running[t]; !ok {
					tests = append(tests, t)
				}
				if !strings.HasPrefix(e.Output, "=== ") { // RUN, PAUSE, CONT, NAME
					running[t] = append(running[t], e.Output)
				} else if running[t] == nil {
					running[t] = []string{}
				}
			case "skip", "fail":
				if e.Test != "" {
					end(t, "--- "+strings.ToUpper(e.Action)+":")
					break
				}
				failed = failed || e.Action == "fail"
				end(t, "")
				for _, l := range report[e.Package] {
					w.WriteString(l)
				}
				delete(report, e.Package)
			case "pass":
				if e.Test != "" {
					delete(running, t)
					break
				}
				for _, l := range report[e.Package] {
					w.WriteString(l)
				}
				for _, l := range running[t] {
					if strings.HasPrefix(l, "ok") { // go test prints only this line of a package that passed
						w.WriteString(l)
					}
				}
				delete(running, t)
				delete(report, e.Package)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	// Packages that never ended (go test killed, the stream cut short): print all there is.
	for _, p := range pkgs {
		if _, open := report[p]; !open {
			continue
		}
		for _, t := range tests {
			if _, ok := running[t]; ok && t.pkg == p {
				end(t, "")
			}
		}
		for _, l := range report[p] {
			w.WriteString(l)
		}
	}
	if failed {
		w.WriteString("FAIL\n")
	}
	return w.Flush()
}
