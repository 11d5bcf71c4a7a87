package hw

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MIGProfile returns the family's MIG profile of that name; nil, false when the family has no MIG
// or no such profile.
func (g *GPU) MIGProfile(name string) (*MIGProfile, bool) {
	if g.MIG == nil {
		return nil, false
	}
	p := g.MIG.profile(name)
	return p, p != nil
}

// Held is how much of the family's GPUs a pod holds, in GPUs: its whole GPUs, and each MIG slice
// as its share of the GPU's compute slices (seven 1g slices of an H100 hold one GPU; a 3g.40gb
// holds 3/7 of one). GPU allocation counts this, so a MIG-partitioned GPU is as allocated as its
// slices in use. An unknown profile holds nothing.
func (g *GPU) Held(wholeGPUs int64, migProfile string, slices int) float64 {
	held := float64(wholeGPUs)
	if p, ok := g.MIGProfile(migProfile); ok && slices > 0 {
		held += float64(slices) * g.MIG.ComputeFraction(p)
	}
	return held
}

func (m *MIG) profile(name string) *MIGProfile {
	for i := range m.Profiles {
		if m.Profiles[i].Name == name {
			return &m.Profiles[i]
		}
	}
	return nil
}

// ProfileNames lists the profiles in catalog order, smallest first; nil for a nil MIG.
func (m *MIG) ProfileNames() []string {
	if m == nil {
		return nil
	}
	names := make([]string, len(m.Profiles))
	for i := range m.Profiles {
		names[i] = m.Profiles[i].Name
	}
	return names
}

// Full returns the profile covering the whole GPU (7g.80gb on an H100); nil for a nil MIG or a
// table the catalog validation would refuse.
func (m *MIG) Full() *MIGProfile {
	if m == nil {
		return nil
	}
	for i := range m.Profiles {
		if p := &m.Profiles[i]; p.ComputeSlices == m.ComputeSlices && p.MemorySlices == m.MemorySlices {
			return p
		}
	}
	return nil
}

// fractionSlack absorbs rounding in a caller's fraction: 2*(1.0/7) is one ulp above 2.0/7 and
// must still fit a 2g profile rather than jump to 3g.
const fractionSlack = 1e-9

// Smallest returns the smallest profile (fewest compute slices, then fewest memory slices) whose
// compute fraction ComputeSlices/m.ComputeSlices is >= fraction; ok=false if fraction > 1 or <= 0
// (or NaN, or m is nil).
func (m *MIG) Smallest(fraction float64) (p *MIGProfile, ok bool) {
	if m == nil || !(fraction > 0 && fraction <= 1) {
		return nil, false
	}
	for i := range m.Profiles {
		q := &m.Profiles[i]
		if m.ComputeFraction(q) < fraction-fractionSlack {
			continue
		}
		if p == nil || q.ComputeSlices < p.ComputeSlices || q.ComputeSlices == p.ComputeSlices && q.MemorySlices < p.MemorySlices {
			p = q
		}
	}
	return p, p != nil
}

// ComputeFraction is the profile's share of the GPU's compute slices.
func (m *MIG) ComputeFraction(p *MIGProfile) float64 {
	return float64(p.ComputeSlices) / float64(m.ComputeSlices)
}

// MemoryFraction is the profile's share of the GPU's memory slices (memory, L2 and bandwidth).
func (m *MIG) MemoryFraction(p *MIGProfile) float64 {
	return float64(p.MemorySlices) / float64(m.MemorySlices)
}

// Place lays out the named profiles on one GPU following the placement geometry: each instance at
// one of its profile's Starts, occupying memory slices [start, start+MemorySlices), no overlap,
// total compute slices <= m.ComputeSlices. It returns one start per profile in input order, or an
// error naming the first profile that cannot be placed and why.
//
// The search is exhaustive (a GPU holds at most 7 instances), larger profiles first as nvidia-smi
// users place them, lowest start first; identical profiles take increasing starts so that the
// search does not retry their permutations.
func (m *MIG) Place(profiles []string) ([]int, error) {
	if m == nil {
		return nil, fmt.Errorf("MIG placement of %s: the GPU has no MIG", strings.Join(profiles, ", "))
	}
	ps := make([]*MIGProfile, len(profiles))
	for i, n := range profiles {
		if ps[i] = m.profile(n); ps[i] == nil {
			return nil, fmt.Errorf("profiles[%d] %q: no such MIG profile (have %s)", i, n, strings.Join(m.ProfileNames(), ", "))
		}
	}
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	// Stable, so equal profiles keep input order; the name tiebreak keeps identical ones adjacent.
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := ps[a], ps[b]
		return cmp.Or(
			cmp.Compare(pb.MemorySlices, pa.MemorySlices),
			cmp.Compare(pb.ComputeSlices, pa.ComputeSlices),
			strings.Compare(pa.Name, pb.Name))
	})

	// Budgets first: they give the plainest reason, and most refusals are one of them.
	compute, memory := 0, 0
	for _, i := range order {
		p := ps[i]
		if compute+p.ComputeSlices > m.ComputeSlices {
			return nil, fmt.Errorf("profiles[%d] %q: needs %s, only %d of the GPU's %d are left once the larger profiles are placed",
				i, p.Name, count(p.ComputeSlices, "compute slice"), m.ComputeSlices-compute, m.ComputeSlices)
		}
		if memory+p.MemorySlices > m.MemorySlices {
			return nil, fmt.Errorf("profiles[%d] %q: needs %s, only %d of the GPU's %d are left once the larger profiles are placed",
				i, p.Name, count(p.MemorySlices, "memory slice"), m.MemorySlices-memory, m.MemorySlices)
		}
		compute += p.ComputeSlices
		memory += p.MemorySlices
	}

	used := make([]bool, m.MemorySlices)
	starts := make([]int, len(ps))
	deepest, stuck := -1, []bool(nil) // the furthest the search got, and the slices taken there
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(order) {
			return true
		}
		i := order[k]
		p := ps[i]
		after := math.MinInt
		if k > 0 && ps[order[k-1]] == p {
			after = starts[order[k-1]]
		}
		for _, s := range p.Starts {
			if s <= after || !free(used, s, p.MemorySlices) {
				continue
			}
			take(used, s, p.MemorySlices, true)
			starts[i] = s
			if try(k + 1) {
				return true
			}
			take(used, s, p.MemorySlices, false)
		}
		if k > deepest {
			deepest, stuck = k, slices.Clone(used)
		}
		return false
	}
	if try(0) {
		return starts, nil
	}
	i := order[deepest]
	p := ps[i]
	return nil, fmt.Errorf("profiles[%d] %q: none of its starts %s has %s free once the larger profiles are placed (taken: %s)",
		i, p.Name, intList(p.Starts), count(p.MemorySlices, "memory slice"), takenList(stuck))
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func free(used []bool, start, size int) bool {
	if start < 0 || start+size > len(used) {
		return false // a start the catalog validation would refuse
	}
	for _, u := range used[start : start+size] {
		if u {
			return false
		}
	}
	return true
}

func take(used []bool, start, size int, v bool) {
	for j := start; j < start+size; j++ {
		used[j] = v
	}
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func takenList(used []bool) string {
	var taken []int
	for j, u := range used {
		if u {
			taken = append(taken, j)
		}
	}
	if len(taken) == 0 {
		return "none"
	}
	return intList(taken)
}
