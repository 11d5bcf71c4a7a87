package render

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNameExamples(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"workload-000001", "workload-000001"},
		{"workload-1000000", "workload-1000000"},
		{"a", "a"},
		{"Workload-000001", "workload-000001--"},
		{"wl--1", "wl-1--"},
		{"000123", "w-000123--"},
		{"", "w--"},
		{"-", "w--"},
		{"team/a:job_7", "team-a-job-7--"},
		{strings.Repeat("x", 31), strings.Repeat("x", 15) + "--"},
		{"ab-", "ab--"},
	} {
		got := Name(tc.id)
		if tc.want == tc.id {
			if got != tc.id {
				t.Errorf("Name(%q) = %q, want it verbatim", tc.id, got)
			}
			continue
		}
		if !strings.HasPrefix(got, tc.want) || len(got) != len(tc.want)+hashLen {
			t.Errorf("Name(%q) = %q, want %q + %d hash digits", tc.id, got, tc.want, hashLen)
		}
	}
}

// TestNamesDistinctAndValid checks 1,000,000 ids in the trace's format plus adversarial ids that
// differ only in case, punctuation, length beyond the limit or a look-alike of a hashed name.
func TestNamesDistinctAndValid(t *testing.T) {
	n := 1000000
	if testing.Short() {
		n = 50000
	}
	ids := make([]string, 0, n+50000)
	for i := range n {
		ids = append(ids, fmt.Sprintf("workload-%06d", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	long := strings.Repeat("distributed-training-run-", 4)
	for i := range 10000 {
		ids = append(ids,
			fmt.Sprintf("Workload-%06d", i),       // case only
			fmt.Sprintf("workload_%06d", i),       // punctuation only
			fmt.Sprintf("%s%06d", long, i),        // differ after the truncation point
			fmt.Sprintf("%d", rng.Uint64()),       // starts with a digit
			Name(fmt.Sprintf("Workload-%06d", i)), // a hashed name used as an id
		)
	}
	seen := make(map[string]string, len(ids))
	for _, id := range ids {
		name := Name(id)
		if prev, dup := seen[name]; dup && prev != id {
			t.Fatalf("Name(%q) = Name(%q) = %q", id, prev, name)
		}
		seen[name] = id
		if len(name) > MaxNameLength {
			t.Fatalf("Name(%q) = %q: longer than %d", id, name, MaxNameLength)
		}
		if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
			t.Fatalf("Name(%q) = %q: %v", id, name, msgs)
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			t.Fatalf("Name(%q) = %q: %v", id, name, msgs)
		}
		if msgs := validation.IsValidLabelValue(name); len(msgs) > 0 {
			t.Fatalf("Name(%q) = %q: %v", id, name, msgs)
		}
	}
}

func FuzzName(f *testing.F) {
	for _, s := range []string{"workload-000001", "", "--", "Ä", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		name := Name(id)
		if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 || len(name) > MaxNameLength {
			t.Fatalf("Name(%q) = %q: %v", id, name, msgs)
		}
	})
}
