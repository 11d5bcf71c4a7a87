package gen

import (
	"math"
	"math/rand/v2"
)

// sampler draws every random number of the generator from one PCG stream. Its transcendental
// functions are portable copies (see expP, logP) so a seed gives the same bits on every platform.
type sampler struct {
	r *rand.Rand
}

func newSampler(seed uint64) *sampler {
	// The second PCG word is a fixed odd constant so a seed alone selects the stream.
	return &sampler{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

// uniform returns a float64 in [0, 1).
func (s *sampler) uniform() float64 { return s.r.Float64() }

// uniformIn returns a float64 in [lo, hi].
func (s *sampler) uniformIn(lo, hi float64) float64 {
	if lo == hi {
		return lo
	}
	return lo + float64((hi-lo)*s.r.Float64())
}

// intIn returns an int in [lo, hi].
func (s *sampler) intIn(lo, hi int) int { return lo + s.r.IntN(hi-lo+1) }

// exp1 returns an Exp(1) variate by inversion.
func (s *sampler) exp1() float64 {
	// 1 - U is in (0, 1], so the logarithm is finite.
	return -logP(1 - s.r.Float64())
}

// normal returns a standard normal variate (Marsaglia's polar method: only log and sqrt, both portable).
func (s *sampler) normal() float64 {
	for {
		u := float64(2*s.r.Float64()) - 1
		v := float64(2*s.r.Float64()) - 1
		q := float64(u*u) + float64(v*v)
		if q > 0 && q < 1 {
			return u * math.Sqrt(float64(-2*logP(q))/q)
		}
	}
}

// lognormal returns median * exp(sigma * Z).
func (s *sampler) lognormal(median, sigma float64) float64 {
	return median * expP(float64(sigma*s.normal()))
}

// geometric returns a count >= 1 with the given mean (mean >= 1).
func (s *sampler) geometric(mean float64) int {
	if mean <= 1 {
		return 1
	}
	// P(N > k) = (1 - 1/mean)^k.
	u := 1 - s.r.Float64()
	return 1 + int(logP(u)/logP(1-1/mean))
}

// pick returns the index i with probability probs(i); n is the number of choices. The cumulative
// sum runs in index order, so the choice does not depend on anything but the draw.
func (s *sampler) pick(n int, prob func(int) float64) int {
	u := s.r.Float64()
	acc := 0.0
	for i := 0; i < n; i++ {
		acc += prob(i)
		if u < acc {
			return i
		}
	}
	// Rounding can leave the sum a hair below 1: the last choice with positive probability wins.
	for i := n - 1; i > 0; i-- {
		if prob(i) > 0 {
			return i
		}
	}
	return 0
}

// The functions below are the pure-Go algorithms of Go's math.Exp and math.Log (FreeBSD msun, BSD
// licence). math.Exp and math.Log use assembly on amd64, arm64 and s390x, which can differ in the last
// bit from each other; products are wrapped in float64() so no compiler fuses them into FMA.

// expP returns e**x for |x| < 700 (the generator never needs more; larger inputs saturate).
func expP(x float64) float64 {
	const (
		ln2Hi    = 6.93147180369123816490e-01
		ln2Lo    = 1.90821492927058770002e-10
		log2e    = 1.44269504088896338700e+00
		overflow = 7.09782712893383973096e+02
		under    = -7.45133219101941108420e+02
		nearZero = 1.0 / (1 << 28)
		p1       = 1.66666666666666657415e-01
		p2       = -2.77777777770155933842e-03
		p3       = 6.61375632143793436117e-05
		p4       = -1.65339022054652515390e-06
		p5       = 4.13813679705723846039e-08
	)
	switch {
	case math.IsNaN(x):
		return x
	case x > overflow:
		return math.Inf(1)
	case x < under:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	var k int
	switch {
	case x < 0:
		k = int(float64(log2e*x) - 0.5)
	case x > 0:
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(k) * ln2Lo
	r := hi - lo
	t := r * r
	poly := float64(t*p5) + p4
	poly = float64(t*poly) + p3
	poly = float64(t*poly) + p2
	poly = float64(t*poly) + p1
	c := r - float64(t*poly)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return math.Ldexp(y, k)
}

// logP returns the natural logarithm of x > 0.
func logP(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
		l1    = 6.666666666666735130e-01
		l2    = 3.999999999940941908e-01
		l3    = 2.857142874366239149e-01
		l4    = 2.222219843214978396e-01
		l5    = 1.818357216161805012e-01
		l6    = 1.531383769920937332e-01
		l7    = 1.479819860511658591e-01
	)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := s * s
	s4 := s2 * s2
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	r := t1 + t2
	hfsq := float64(0.5*f) * f
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}
