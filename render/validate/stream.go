package validate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Result summarises a validated stream of documents.
type Result struct {
	// Objects counts the objects found (items of a List count one each); Invalid those with errors.
	Objects, Invalid int
	// Errors are every problem found, in document order; documents that could not be parsed
	// produce one error each and are not counted as objects.
	Errors []*Error
}

// ValidateYAML validates every object in a multi-document YAML file, a JSON object, a JSON array
// or a stream of JSON objects (kind: List documents are expanded). Errors name source, document,
// the line the document starts on, the object and the field.
func (v *Validator) ValidateYAML(r io.Reader, source string) []error {
	res := v.ValidateStream(context.Background(), r, source)
	out := make([]error, len(res.Errors))
	for i, e := range res.Errors {
		out[i] = e
	}
	return out
}

// ValidateStream is ValidateYAML with counts, for callers that print a summary.
func (v *Validator) ValidateStream(ctx context.Context, r io.Reader, source string) Result {
	var res Result
	data, err := io.ReadAll(r)
	if err != nil {
		res.Errors = append(res.Errors, &Error{Source: source, Detail: fmt.Sprintf("read: %v", err)})
		return res
	}
	for _, d := range splitDocuments(data) {
		if err := ctx.Err(); err != nil {
			res.Errors = append(res.Errors, &Error{Source: source, Detail: err.Error()})
			return res
		}
		v.document(ctx, d, source, &res)
	}
	return res
}

// document is one YAML document or JSON value and where it starts.
type document struct {
	// line is where the document's content starts; dataLine the line of data's first byte.
	index, line, dataLine int
	data                  []byte
	json                  bool
	err                   error
}

func (v *Validator) document(ctx context.Context, d document, source string, res *Result) {
	fail := func(format string, args ...any) {
		res.Errors = append(res.Errors, &Error{Source: source, Doc: d.index, Line: d.line, Detail: fmt.Sprintf(format, args...)})
	}
	if d.err != nil {
		fail("%v", d.err)
		return
	}
	js := d.data
	if !d.json {
		var err error
		if js, err = yaml.YAMLToJSONStrict(d.data); err != nil {
			fail("parse YAML: %s", fileLines(err.Error(), d.dataLine))
			return
		}
	}
	var value any
	strict, err := sigsjson.UnmarshalStrict(js, &value, sigsjson.DisallowDuplicateFields)
	if err != nil {
		fail("parse: %v", err)
		return
	}
	for _, se := range strict {
		fail("%v", se)
	}
	if value == nil {
		return
	}
	items := []any{value}
	list := false
	if arr, ok := value.([]any); ok {
		items, list = arr, true
	} else if m, ok := value.(map[string]any); ok && isList(m) {
		arr, ok := m["items"].([]any)
		if !ok {
			fail("List without an items array")
			return
		}
		items, list = arr, true
	}
	for i, it := range items {
		m, ok := it.(map[string]any)
		e := &Error{Source: source, Doc: d.index, Line: d.line}
		if list {
			e.Item = i + 1
		}
		res.Objects++
		if !ok {
			res.Invalid++
			e.Detail = fmt.Sprintf("not an object (%T)", it)
			res.Errors = append(res.Errors, e)
			continue
		}
		errs := v.validateContent(ctx, m, "", false)
		if len(errs) > 0 {
			res.Invalid++
		}
		for _, fe := range errs {
			fe.Source, fe.Doc, fe.Item, fe.Line = e.Source, e.Doc, e.Item, e.Line
			res.Errors = append(res.Errors, fe)
		}
	}
}

// yamlLine matches the document-relative line numbers in YAML parser errors.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// fileLines rewrites a YAML error's document-relative line numbers into file lines and puts it
// on one line, so every error stays one line of output.
func fileLines(msg string, dataLine int) string {
	msg = yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(m[len("line "):])
		if err != nil {
			return m
		}
		return "line " + strconv.Itoa(dataLine+n-1)
	})
	return strings.Join(strings.Fields(msg), " ")
}

func isList(m map[string]any) bool {
	kind, _ := m["kind"].(string)
	_, hasItems := m["items"]
	return hasItems && (kind == "List" || (len(kind) > 4 && kind[len(kind)-4:] == "List"))
}

// splitDocuments cuts a file into YAML documents at "---" lines, or into JSON values when the
// file starts with '{' or '['. Documents holding only blanks and comments are dropped; indexes
// count every document so they match what a reader counts in the file.
func splitDocuments(data []byte) []document {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(data)
	}
	var docs []document
	index, start := 1, 1
	var cur bytes.Buffer
	flush := func() {
		if line := firstContentLine(cur.Bytes()); line > 0 {
			docs = append(docs, document{index: index, line: start + line - 1, dataLine: start, data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if isSeparator(line) {
			// A leading separator does not end a document.
			if n > 1 || cur.Len() > 0 {
				flush()
				index++
			}
			start = n + 1
			continue
		}
		cur.Write(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func isSeparator(line []byte) bool {
	line = bytes.TrimRight(line, " \t\r")
	return bytes.Equal(line, []byte("---")) || bytes.HasPrefix(line, []byte("--- "))
}

// firstContentLine is the 1-based line of the first line that is neither blank nor a comment,
// 0 if there is none.
func firstContentLine(doc []byte) int {
	for i, l := range bytes.Split(doc, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return i + 1
		}
	}
	return 0
}

func splitJSON(data []byte) []document {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	for index := 1; ; index++ {
		start := int(dec.InputOffset())
		for start < len(data) && isSpace(data[start]) {
			start++
		}
		line := 1 + bytes.Count(data[:start], []byte("\n"))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			return append(docs, document{index: index, line: line, err: fmt.Errorf("parse JSON: %w", err)})
		}
		docs = append(docs, document{index: index, line: line, data: raw, json: true})
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
