package replay

import (
	"slices"
	"testing"
)

func TestCompareOrdersBySubmitThenID(t *testing.T) {
	type w struct {
		sec float64
		id  string
	}
	ws := []w{{5, "b"}, {5, "a"}, {1, "z"}, {5, "a0"}, {0, "m"}}
	slices.SortStableFunc(ws, func(x, y w) int { return Compare(x.sec, x.id, y.sec, y.id) })
	want := []w{{0, "m"}, {1, "z"}, {5, "a"}, {5, "a0"}, {5, "b"}}
	if !slices.Equal(ws, want) {
		t.Errorf("order %v, want %v", ws, want)
	}
}
