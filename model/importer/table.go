package importer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/model/fielderr"
)

// readFile returns a file's contents, gunzipped when it starts with gzip's magic bytes.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		return data, nil
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	out, err := io.ReadAll(gz)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return out, nil
}

// table reads a CSV file by its published columns. A first row naming the columns is a header and
// may put them in any order; without one (PAI publishes its headers in separate files) the
// columns are taken in the published order. A leading unnamed column (a pandas index) is ignored.
type table struct {
	file  string
	cols  []string
	r     *csv.Reader
	index []int // column position of each of cols
	shift bool  // a leading index column without a header
	first []string
}

func newTable(file string, data []byte, cols []string) (*table, error) {
	r := csv.NewReader(bufio.NewReader(bytes.NewReader(data)))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	t := &table{file: file, cols: cols, r: r}
	rec, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, fielderr.New(file, 1, "", "empty file (want columns %s)", strings.Join(cols, ","))
	}
	if err != nil {
		return nil, t.csvErr(err)
	}
	if pos, ok := headerPositions(rec, cols); ok {
		t.index = pos
		return t, nil
	}
	t.index = make([]int, len(cols))
	for i := range cols {
		t.index[i] = i
	}
	t.shift = len(rec) == len(cols)+1
	t.first = rec
	return t, nil
}

// headerPositions maps the columns to their positions when rec names them all.
func headerPositions(rec, cols []string) ([]int, bool) {
	pos := make([]int, len(cols))
	for i, c := range cols {
		pos[i] = -1
		for k, h := range rec {
			if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), c) {
				pos[i] = k
			}
		}
		if pos[i] < 0 {
			return nil, false
		}
	}
	return pos, true
}

// row is one CSV row by column name.
type row struct {
	t    *table
	rec  []string
	line int
}

// next returns the next row, io.EOF after the last.
func (t *table) next() (row, error) {
	var rec []string
	var err error
	line := 1
	if t.first != nil {
		rec, t.first = t.first, nil
	} else {
		rec, err = t.r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return row{}, io.EOF
			}
			return row{}, t.csvErr(err)
		}
		line, _ = t.r.FieldPos(0)
	}
	if t.shift && len(rec) == len(t.cols)+1 {
		rec = rec[1:]
	}
	need := 0
	for _, p := range t.index {
		need = max(need, p+1)
	}
	if len(rec) < need {
		return row{t: t, rec: rec, line: line}, fielderr.New(t.file, line, "", "%d columns, want %d (%s)", len(rec), len(t.cols), strings.Join(t.cols, ","))
	}
	return row{t: t, rec: rec, line: line}, nil
}

func (t *table) csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fielderr.New(t.file, pe.StartLine, "", "%v (the row starting here)", pe.Err)
	}
	return fmt.Errorf("import %s: %w", t.file, err)
}

// str returns a column's value, trimmed.
func (r row) str(col string) string {
	for i, c := range r.t.cols {
		if c == col {
			return strings.TrimSpace(r.rec[r.t.index[i]])
		}
	}
	panic("importer: unknown column " + col) // the formats name their own columns
}

// missing reports an empty or null-like value (the traces write "", "NA", "NaN", "None", "\N").
func missing(s string) bool {
	switch strings.ToLower(s) {
	case "", "na", "nan", "none", "null", "\\n":
		return true
	}
	return false
}

// num parses a column as a finite number; ok is false when the value is missing.
func (r row) num(col string) (v float64, ok bool, err error) {
	s := r.str(col)
	if missing(s) {
		return math.NaN(), false, nil
	}
	v, perr := strconv.ParseFloat(s, 64)
	if perr != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, fielderr.New(r.t.file, r.line, col, "%q is not a number", short(s))
	}
	return v, true, nil
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
