package results

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Status is what a progress display shows: milestone counts and the trace clock.
type Status struct {
	Counts
	TraceSec float64
}

// Progress shows a run's progress: a bar with counts, trace clock and ETA on a terminal, a plain
// line at most every interval otherwise (logs, CI).
type Progress struct {
	bar      *progressbar.ProgressBar
	w        io.Writer
	interval time.Duration
	last     time.Time
	lastLine string
}

// NewProgress shows progress on w; tty selects the bar. interval is the plain-line period
// (10 s when zero).
func NewProgress(w io.Writer, total int, tty bool, interval time.Duration) *Progress {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	p := &Progress{w: w, interval: interval}
	if tty {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("finished"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	}
	return p
}

// Update shows s (rate-limited).
func (p *Progress) Update(s Status) {
	if p.bar != nil {
		p.bar.Describe(s.states() + "  trace " + clock(s.TraceSec))
		_ = p.bar.Set(s.Finished()) // drawing errors only affect the display
		return
	}
	now := time.Now()
	if now.Sub(p.last) < p.interval {
		return
	}
	p.last = now
	p.line(s)
}

// Done draws the final state.
func (p *Progress) Done(s Status) {
	if p.bar != nil {
		p.Update(s)
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
		return
	}
	p.line(s)
}

func (p *Progress) line(s Status) {
	l := fmt.Sprintf("trace %s  %s  (of %d)", clock(s.TraceSec), s.states(), s.Total)
	if l != p.lastLine {
		fmt.Fprintln(p.w, l)
		p.lastLine = l
	}
}

// states lists the non-zero state counts in the order of a workload's life; they sum to Total.
func (c Counts) states() string {
	var b strings.Builder
	for _, st := range States {
		if n := c.States[st]; n > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s %d", strings.ToLower(st), n)
		}
	}
	return b.String()
}

// clock prints trace seconds as [Dd]HH:MM:SS.
func clock(sec float64) string {
	t := int64(sec)
	d, h, m, s := t/86400, t/3600%24, t/60%60, t%60
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if d > 0 {
		out = strconv.FormatInt(d, 10) + "d" + out
	}
	return out
}
