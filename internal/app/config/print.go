package config

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Sources returns the layer of every value, by key path: each key of Config, each broker key
// present, and each auth.acls principal.
func (c *Config) Sources() map[string]Source {
	out := map[string]Source{}
	for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
		out[p] = c.Source(p)
	}
	for k := range c.Broker {
		out["broker."+k] = c.Source("broker." + k)
	}
	for k := range c.Auth.ACLs {
		out["auth.acls."+k] = c.Source("auth.acls." + k)
	}
	delete(out, "broker")
	delete(out, "auth.acls")
	return out
}

// node encodes c as a YAML tree with secrets masked; with sources, each value carries its
// layer as a line comment.
func (c *Config) node(sources bool) (*yaml.Node, error) {
	var doc yaml.Node
	if err := doc.Encode(c); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	annotate(&doc, "", c, sources)
	return &doc, nil
}

// annotate unquotes numeric and boolean broker values (stored as strings) and, with sources,
// adds "# default|file|env|flag" comments.
func annotate(n *yaml.Node, path string, c *Config, sources bool) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		if path == "broker" && v.Kind == yaml.ScalarNode {
			if _, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
				v.Tag, v.Style = "!!int", 0
			} else if _, err := strconv.ParseFloat(v.Value, 64); err == nil {
				v.Tag, v.Style = "!!float", 0
			} else if v.Value == "true" || v.Value == "false" {
				v.Tag, v.Style = "!!bool", 0
			}
		}
		leaf := v.Kind != yaml.MappingNode || p == "auth.acls" && len(v.Content) == 0 || p == "broker" && len(v.Content) == 0
		switch {
		case leaf:
			if sources {
				if v.Kind == yaml.ScalarNode {
					v.LineComment = string(c.Source(p))
				} else {
					k.LineComment = string(c.Source(p))
				}
			}
		default:
			annotate(v, p, c, sources)
		}
	}
}

// WriteYAML writes the effective configuration as YAML with secrets masked; with sources,
// every value is followed by a comment naming its layer (default, file, env, flag).
func (c *Config) WriteYAML(w io.Writer, sources bool) error {
	doc, err := c.node(sources)
	if err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return enc.Close()
}

// printedJSON is the shape of WriteJSON's output.
type printedJSON struct {
	Config  any               `json:"config"`
	Sources map[string]Source `json:"sources"`
}

// WriteJSON writes {"config": {...}, "sources": {"key.path": "default|file|env|flag"}}: the
// same keys and values as WriteYAML, secrets masked.
func (c *Config) WriteJSON(w io.Writer) error {
	doc, err := c.node(false)
	if err != nil {
		return err
	}
	var tree any
	if err := doc.Decode(&tree); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(printedJSON{Config: tree, Sources: c.Sources()}); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}
