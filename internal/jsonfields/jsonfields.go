package jsonfields

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// FieldError is a field refused by Checker.Check.
type FieldError struct {
	// Missing is true for a missing field, false for an unknown key.
	Missing bool
	// Field is the unknown key, or the name of the missing field.
	Field string
	// Path is where the object holding Field is, from the argument: ""
	// for the argument itself, "items[0]", "order.lines".
	Path string
	// Near is, for an unknown key, the nearest field name (see Nearest);
	// "" when none is close.
	Near string
	// Fields are, for an unknown key, the object's field names in the
	// order the type declares them.
	Fields []string
	// Zero is, for a missing field, its zero value as compact JSON.
	Zero string
}

// Error words e for an API caller: `unknown field "Bb" in the argument
// (did you mean "B"? its fields: A, B)`, `missing field "B" in items[0]
// (give its zero value, 0)`.
func (e *FieldError) Error() string {
	where := "the argument"
	if e.Path != "" {
		where = e.Path
	}
	if e.Missing {
		return fmt.Sprintf("missing field %q in %s (give its zero value, %s)", e.Field, where, e.Zero)
	}
	hint := ""
	if e.Near != "" {
		hint = fmt.Sprintf("did you mean %q? ", e.Near)
	}
	return fmt.Sprintf("unknown field %q in %s (%sits fields: %s)", e.Field, where, hint, strings.Join(e.Fields, ", "))
}

// Checker checks JSON against one Go type. It is immutable and safe for
// concurrent use.
type Checker struct {
	root *schema
	defs map[string]*schema
	zero any
}

// New returns a Checker for the type whose JSON Schema (draft 2020-12, as
// server/reflection writes it, with $defs for recursive types) and zero
// value's JSON are given. It returns nil, meaning "nothing to check", for
// an empty or malformed schema.
func New(schemaJSON, zero json.RawMessage) *Checker {
	var root schema
	if len(schemaJSON) == 0 || json.Unmarshal(schemaJSON, &root) != nil {
		return nil
	}
	c := &Checker{root: &root, defs: root.Defs}
	if len(zero) > 0 {
		_ = json.Unmarshal(zero, &c.zero)
	}
	return c
}

// Check returns the first unknown key or missing field of the JSON text in
// (keys in sorted order, then fields in declared order), or nil. A nil
// Checker and JSON that does not parse give nil: the decoder words that.
// Missing fields are checked where the zero value says what a field holds
// (the argument and the structs nested in it, not the elements of lists
// or maps).
func (c *Checker) Check(in []byte) *FieldError {
	if c == nil {
		return nil
	}
	var v any
	if json.Unmarshal(in, &v) != nil {
		return nil
	}
	return c.check("", c.root, v, c.zero)
}

// schema is the part of a reflected JSON Schema the check reads.
type schema struct {
	Ref                  string             `json:"$ref"`
	Properties           orderedProps       `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties *schema            `json:"additionalProperties"`
	Defs                 map[string]*schema `json:"$defs"`
}

// orderedProps keeps the properties in the schema's order, for messages
// that list them as declared.
type orderedProps struct {
	names []string
	props map[string]*schema
}

func (p *orderedProps) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &p.props); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch x := tok.(type) {
		case json.Delim:
			if x == '{' || x == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 {
				p.names = append(p.names, x)
				var skip json.RawMessage
				if dec.Decode(&skip) != nil {
					return nil
				}
			}
		}
	}
	return nil
}

func (c *Checker) resolve(s *schema) *schema {
	for i := 0; s != nil && s.Ref != "" && i < 32; i++ {
		s = c.defs[strings.TrimPrefix(s.Ref, "#/$defs/")]
	}
	return s
}

// check walks v against s; ex is the type's zero value at the same place
// (nil where unknown).
func (c *Checker) check(path string, s *schema, v, ex any) *FieldError {
	s = c.resolve(s)
	if s == nil {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		if len(s.Properties.names) == 0 {
			if s.AdditionalProperties != nil {
				keys := sortedKeys(x)
				for _, k := range keys {
					if err := c.check(join(path, k), s.AdditionalProperties, x[k], nil); err != nil {
						return err
					}
				}
			}
			return nil
		}
		exObj, _ := ex.(map[string]any)
		for _, k := range sortedKeys(x) {
			name := matchField(k, s.Properties.names)
			if name == "" {
				return &FieldError{Field: k, Path: path, Near: Nearest(k, s.Properties.names), Fields: s.Properties.names}
			}
			var exField any
			if exObj != nil {
				exField = exObj[name]
			}
			if err := c.check(join(path, name), s.Properties.props[name], x[k], exField); err != nil {
				return err
			}
		}
		for _, name := range s.Properties.names {
			if exObj == nil || exObj[name] == nil {
				continue // optional: omitempty, a pointer, or unknown here
			}
			if matchKey(name, x) {
				continue
			}
			return &FieldError{Missing: true, Field: name, Path: path, Zero: compactJSON(exObj[name])}
		}
	case []any:
		if s.Items != nil {
			for i, e := range x {
				if err := c.check(fmt.Sprintf("%s[%d]", path, i), s.Items, e, nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// matchField returns the field name key decodes into, as encoding/json
// matches: exactly, else ignoring case; "" when none.
func matchField(key string, names []string) string {
	for _, n := range names {
		if n == key {
			return n
		}
	}
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return n
		}
	}
	return ""
}

// matchKey reports whether obj has a key that decodes into field name.
func matchKey(name string, obj map[string]any) bool {
	if _, ok := obj[name]; ok {
		return true
	}
	for k := range obj {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

// Nearest returns the name in names closest to s: equal but for case, or
// within an edit distance of 2 (1 for names of up to 4 letters); "" when
// none is that close.
func Nearest(s string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return n
		}
		d := EditDistance(strings.ToLower(s), strings.ToLower(n))
		if d < bestD {
			best, bestD = n, d
		}
	}
	limit := 2
	if len(s) <= 4 {
		limit = 1
	}
	if bestD <= limit {
		return best
	}
	return ""
}

// EditDistance is the optimal string alignment distance between a and b,
// in bytes: Levenshtein's insertions, deletions and substitutions, plus
// the transposition of two adjacent bytes ("Sya" is one edit from "Say"),
// after Damerau (1964).
func EditDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(a)][len(b)]
}
