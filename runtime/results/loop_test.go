package results

import (
	"errors"
	"testing"
)

func TestLoopCounter(t *testing.T) {
	cases := []struct {
		name  string
		every float64 // trace seconds between preemptions
		n     int
		want  bool
	}{
		{"at the limit", 0.01, LoopMaxPreemptions, false},
		{"one past the limit", 0.01, LoopMaxPreemptions + 1, true},
		{"slow: the window restarts", 1, 3 * LoopMaxPreemptions, false},
		{"just inside the window", (LoopWindowSec - 0.5) / LoopMaxPreemptions, LoopMaxPreemptions + 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c LoopCounter
			var err error
			for i := 0; i < tc.n && err == nil; i++ {
				err = c.Preempted(100+float64(i)*tc.every, "workload w")
			}
			if got := errors.Is(err, ErrPreemptionLoop); got != tc.want {
				t.Fatalf("loop = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}
