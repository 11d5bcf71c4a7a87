// Package yamldoc reads a YAML file that must hold exactly one document and keeps its node tree,
// so the strict decoders of kueuelab's own files (cluster specs, experiments) can name the line
// of every error.
package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// Root decodes data as exactly one YAML document and returns its root node. name is the file
// in error messages and what the kind of file ("cluster spec", "experiment file").
func Root(name, what string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty %s", name, what)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a %s is a single YAML document", name, extra.Line, what)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return root, nil
}
