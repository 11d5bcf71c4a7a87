package hw

import "math"

// Power interpolates the SPECpower curve at load in [0, 1] (clamped).
func (m *CPU) Power(load float64) float64 {
	l := clamp01(load) * (CurvePoints - 1)
	i := int(l)
	if i >= CurvePoints-1 {
		return m.CurveW[CurvePoints-1]
	}
	f := l - float64(i)
	return m.CurveW[i] + f*(m.CurveW[i+1]-m.CurveW[i])
}

// Capped returns the CPU power and relative frequency (throughput factor) at load under a power
// cap given as a fraction of the curve's full-load power; capFraction ≤ 0 or ≥ 1 is uncapped.
func (m *CPU) Capped(load, capFraction float64) (powerW, freq float64) {
	p := m.Power(load)
	if capFraction <= 0 || capFraction >= 1 || math.IsNaN(capFraction) {
		return p, 1
	}
	limit := capFraction * m.CurveW[CurvePoints-1]
	if p <= limit {
		return p, 1
	}
	idle := m.CurveW[0]
	dyn := p - idle
	f := m.MinFrequency
	if limit > idle {
		f = math.Max(f, math.Pow((limit-idle)/dyn, 1/m.DynamicExponent))
	}
	return idle + dyn*math.Pow(f, m.DynamicExponent), f
}

// NodePower is CPU + Σ GPU + the platform constant.
func (m *CPU) NodePower(cpuW, gpuW float64) float64 { return cpuW + gpuW + m.PlatformW }

// PodShare attributes node power to one pod: the power of its own GPUs, plus a share of CPU and
// platform power proportional to its CPU request among the running pods' requests (an equal
// share when no running pod requests CPU).
func PodShare(podGPUW, podCPUReq, totalCPUReq float64, running int, cpuAndPlatformW float64) float64 {
	switch {
	case totalCPUReq > 0:
		return podGPUW + cpuAndPlatformW*podCPUReq/totalCPUReq
	case running > 0:
		return podGPUW + cpuAndPlatformW/float64(running)
	}
	return podGPUW
}
