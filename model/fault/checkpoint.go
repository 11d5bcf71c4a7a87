package fault

import "math"

// YoungDaly is the first-order optimal checkpoint interval √(2·C·M) for a checkpoint that costs
// costSec and a mean time between failures of mtbfSec (Young, "A first order approximation to the
// optimum checkpoint interval", CACM 1974; Daly, FGCS 2006, eq. 21). It is the reference a
// checkpoint-interval sweep is compared with.
func YoungDaly(costSec, mtbfSec float64) float64 {
	if !(costSec > 0) || !(mtbfSec > 0) {
		return math.Inf(1)
	}
	return math.Sqrt(2 * costSec * mtbfSec)
}

// Daly is Daly's higher-order optimum (FGCS 2006, eq. 37): √(2CM)·(1 + √(C/(2M))/3 + C/(18M)) − C
// for C < 2M, else M. It is what YoungDaly approaches when failures are rare against C.
func Daly(costSec, mtbfSec float64) float64 {
	if !(costSec > 0) || !(mtbfSec > 0) {
		return math.Inf(1)
	}
	c, m := costSec, mtbfSec
	if c >= 2*m {
		return m
	}
	return math.Sqrt(2*c*m)*(1+math.Sqrt(c/(2*m))/3+c/(18*m)) - c
}

// ExpectedRuntime is Daly's expected wall time (FGCS 2006, eq. 13) of workSec of work that
// checkpoints every intervalSec of work at costSec each, restarts in restartSec after a failure,
// and fails as a Poisson process of mean mtbfSec (+Inf: never, then it is the work plus the
// checkpoints):
//
//	T = M·e^(R/M)·(e^((τ+C)/M) − 1)·W/τ
//
// It models every interval as costing a checkpoint, the last one included.
func ExpectedRuntime(workSec, intervalSec, costSec, restartSec, mtbfSec float64) float64 {
	if !(intervalSec > 0) {
		return math.Inf(1)
	}
	if math.IsInf(mtbfSec, 1) {
		return workSec * (intervalSec + costSec) / intervalSec
	}
	m := mtbfSec
	return m * math.Exp(restartSec/m) * math.Expm1((intervalSec+costSec)/m) * workSec / intervalSec
}

// Checkpoints is how many checkpoints a run of workSec of work takes when it checkpoints every
// intervalSec of work and never fails: one at the end of every full interval except at the very
// end, where the run finishes instead.
func Checkpoints(workSec, intervalSec float64) int {
	if !(intervalSec > 0) || !(workSec > 0) {
		return 0
	}
	return int(math.Ceil(workSec/intervalSec)) - 1
}
