package hw

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Profile is what the GPU and CPU physics need from a workload profile, each in [0, 1].
type Profile struct {
	CPUUtilization  float64
	GPUUtilization  float64
	MemoryIntensity float64
}

func clamp01(x float64) float64 {
	switch {
	case x < 0 || math.IsNaN(x):
		return 0
	case x > 1:
		return 1
	}
	return x
}

// NaturalPower is the board power the profile draws with no cap (see package doc).
func (g *GPU) NaturalPower(util, memory float64) float64 {
	u, m := clamp01(util), clamp01(memory)
	return g.IdleW + (g.MaxW-g.IdleW)*math.Pow(u, g.UtilExponent)*(1-g.MemoryPowerDrop*m)
}

// ClampCap turns a requested cap into the one the board applies: 0 (or anything ≥ maxW) means
// uncapped (maxW); below minCapW the driver's minimum applies.
func (g *GPU) ClampCap(capW float64) float64 {
	switch {
	case capW <= 0 || capW >= g.MaxW || math.IsNaN(capW):
		return g.MaxW
	case capW < g.MinCapW:
		return g.MinCapW
	}
	return capW
}

// Operating returns the board power and the relative throughput (in (0, 1]) of a GPU running the
// profile under capW (0 = uncapped).
func (g *GPU) Operating(util, memory, capW float64) (powerW, throughput float64) {
	c := g.ClampCap(capW)
	p := g.NaturalPower(util, memory)
	if c >= p {
		return p, 1
	}
	r := c / p
	m := clamp01(memory)
	tc := math.Pow(r, g.Gamma)
	tm := 1 - g.MemoryEpsilon*math.Pow(1-r, g.MemoryGamma)
	return c, (1-m)*tc + m*tm
}

// SliceOperating returns the board-share power (watts) and the relative throughput (in (0, 1],
// relative to the whole uncapped GPU) of a pod with GPU utilisation util and memory intensity
// memory, both as measured on a whole GPU, running on MIG slice p of this family (see package
// doc). The full profile gives exactly Operating(util, memory, 0). A nil p, or a family without
// MIG, means the whole board.
func (g *GPU) SliceOperating(p *MIGProfile, util, memory float64) (powerW, throughput float64) {
	// The whole board by its own formula: the slice formula below reduces to it at c = f = 1, but
	// a compiler that fuses multiply-adds (arm64) could round the two differently.
	if p == nil || g.MIG == nil || p.ComputeSlices == g.MIG.ComputeSlices && p.MemorySlices == g.MIG.MemorySlices {
		return g.NaturalPower(util, memory), 1
	}
	u, m := clamp01(util), clamp01(memory)
	c, f := g.MIG.ComputeFraction(p), g.MIG.MemoryFraction(p)
	slowdown := (1-m)*math.Max(1, u/c) + m*math.Max(1, u/f)
	powerW = c*g.IdleW + (g.MaxW-g.IdleW)*c*math.Pow(math.Min(1, u/c), g.UtilExponent)*(1-g.MemoryPowerDrop*m)
	return powerW, 1 / slowdown
}

// Power is the board power under capW.
func (g *GPU) Power(util, memory, capW float64) float64 {
	p, _ := g.Operating(util, memory, capW)
	return p
}

// Throughput is the relative speed under capW, in (0, 1].
func (g *GPU) Throughput(util, memory, capW float64) float64 {
	_, t := g.Operating(util, memory, capW)
	return t
}

// ParseCap reads a GPU power cap as written on a node label or annotation: "" (uncapped, 0), a
// profile name from capProfiles ("eco"), a percentage of maxW ("70%"), or watts ("450" or
// "450W"). Profiles clamp to minCapW; explicit values outside [minCapW, maxW] are errors.
func (c *Catalog) ParseCap(s string, g *GPU) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if f, ok := c.CapProfiles[s]; ok {
		return g.ClampCap(f * g.MaxW), nil
	}
	var w float64
	switch {
	case strings.HasSuffix(s, "%"):
		pct, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil {
			return 0, fmt.Errorf("power cap %q: not a percentage: %w", s, err)
		}
		w = pct / 100 * g.MaxW
	default:
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(s, "W"), "w"), 64)
		if err != nil {
			return 0, fmt.Errorf("power cap %q: want a profile (%s), a percentage or watts: %w", s, c.profileNames(), err)
		}
		w = v
	}
	if math.IsNaN(w) || w < g.MinCapW || w > g.MaxW {
		return 0, fmt.Errorf("power cap %q = %.0f W for %s: outside [%g, %g] W", s, w, g.Family, g.MinCapW, g.MaxW)
	}
	return w, nil
}

func (c *Catalog) profileNames() string {
	names := make([]string, 0, len(c.CapProfiles))
	for n := range c.CapProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
