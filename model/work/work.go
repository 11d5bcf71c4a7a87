// Package work is the one place that relates a pod's work units to time: gen turns a duration into
// units with it, trace rebuilds a duration from units with it, and the agent's rate at natural speed
// is units / duration. Units are "resource-seconds at the profile's utilisation" scaled by a rate.
package work

import "math"

// Default work rates: units per busy core-second and per busy GPU-second.
const (
	DefaultCPURatePerCore = 1.0
	DefaultGPURatePerGPU  = 1.0
)

// MinUtilization keeps an idle-looking pod from having (almost) no work.
const MinUtilization = 0.1

// RoleFraction is the share of the workload's duration a role is busy: coordinators (launcher,
// controller, a RayJob's submitter, which waits for the job) do little compute, parameter servers
// less than workers. Unknown roles count fully.
func RoleFraction(role string) float64 {
	switch role {
	case "launcher", "controller", "submitter":
		return 0.05
	case "ps":
		return 0.6
	default: // worker, trial, main
		return 1.0
	}
}

// Rates are the work rates used to convert between units and seconds.
type Rates struct {
	CPUPerCore float64
	GPUPerGPU  float64
}

// DefaultRates returns the rates the generator uses unless told otherwise.
func DefaultRates() Rates {
	return Rates{CPUPerCore: DefaultCPURatePerCore, GPUPerGPU: DefaultGPURatePerGPU}
}

// Units returns the work units for a resource: duration × request × max(MinUtilization, util) × rate × role fraction.
func Units(durationSec, request, util, rate float64, role string) float64 {
	if request <= 0 {
		return 0
	}
	return durationSec * request * math.Max(MinUtilization, util) * rate * RoleFraction(role)
}

// Duration inverts Units: the seconds a pod needs to finish units at its natural speed.
// It returns 0 when the resource is not requested.
func Duration(units, request, util, rate float64, role string) float64 {
	d := request * math.Max(MinUtilization, util) * rate * RoleFraction(role)
	if d <= 0 {
		return 0
	}
	return units / d
}
