package work

import (
	"math"
	"testing"
)

func TestUnitsAndDurationInvert(t *testing.T) {
	tests := []struct {
		name                 string
		dur, req, util, rate float64
		role                 string
		wantUnits            float64
	}{
		{"worker at half load", 3600, 1, 0.5, 1, "worker", 1800},
		{"idle-looking pod floors at MinUtilization", 1000, 4, 0.01, 1, "main", 400},
		{"launcher does 5% of the work", 1000, 2, 1, 1, "launcher", 100},
		{"ps does 60%", 1000, 1, 1, 2, "ps", 1200},
		{"unknown role counts fully", 10, 1, 1, 1, "scheduler", 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := Units(tc.dur, tc.req, tc.util, tc.rate, tc.role)
			if math.Abs(u-tc.wantUnits) > 1e-9 {
				t.Fatalf("Units = %v, want %v", u, tc.wantUnits)
			}
			if d := Duration(u, tc.req, tc.util, tc.rate, tc.role); math.Abs(d-tc.dur) > 1e-9*tc.dur {
				t.Fatalf("Duration(Units) = %v, want %v", d, tc.dur)
			}
		})
	}
}

func TestNoRequestMeansNoWork(t *testing.T) {
	if u := Units(3600, 0, 1, 1, "worker"); u != 0 {
		t.Fatalf("Units without a request = %v", u)
	}
	if d := Duration(100, 0, 1, 1, "worker"); d != 0 {
		t.Fatalf("Duration without a request = %v", d)
	}
}
