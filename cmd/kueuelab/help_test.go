package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasAnExample walks the whole command tree: every command a user can run
// (runnable, not hidden, not deprecated) shows examples in its --help (the README promises it),
// and at least one of them names the command's own path, so a sibling's example does not count.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		// cobra adds its help and completion commands only when the root executes, so the tree
		// walked here holds kueuelab's commands alone.
		if !c.Runnable() || c.Hidden || c.Deprecated != "" {
			return
		}
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example", c.CommandPath())
			return
		}
		if !strings.Contains(c.Example, c.CommandPath()) {
			t.Errorf("%q: no example runs it; Example is:\n%s", c.CommandPath(), c.Example)
		}
	}
	walk(newRootCmd())
	if n < 20 {
		t.Fatalf("walked %d runnable commands, want the whole tree", n)
	}
}
