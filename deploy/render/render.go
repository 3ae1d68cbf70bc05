// render: renders the Helm chart in deploy/hvd without Helm, for CI and for
// checking a values file on a machine with no cluster. Standard library only.
//
//	render -chart DIR -chart-json CHART.json -values VALUES.json [-values MORE.json ...]
//	       [-name RELEASE] [-namespace NS]
//
// The chart's Chart.yaml and values files are given as JSON (render.sh
// converts YAML with python3-yaml: Go's standard library reads no YAML).
// Later -values files are merged over earlier ones as Helm merges -f files
// (maps deep-merged, a null deletes). Templates are Go text/template, as in
// Helm, with the few Helm/Sprig functions the chart uses, under the same
// names and with the same meaning; a template calling anything else fails
// to parse here, which keeps the chart to what both can render.
//
// Output: every rendered template under templates/ (files starting with
// "_" only define), as YAML documents each headed by "# Source:", in
// file-name order. Exit 1 with the template's error when rendering fails
// (a `required` or `fail` of the chart, say).
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// Files is .Files of a chart: Get returns a file's text, or "" (as Helm).
type Files struct{ dir string }

func (f Files) Get(name string) string {
	data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(name)))
	if err != nil {
		return ""
	}
	return string(data)
}

func readJSON(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v map[string]interface{}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if v == nil {
		v = map[string]interface{}{}
	}
	return v, nil
}

// merge puts src over dst as Helm merges values files: maps merge key by
// key, anything else replaces, and a null removes the key.
func merge(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = merge(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

// ---- Helm / Sprig functions ------------------------------------------------

// strval is Sprig's: how a value reads as a string.
func strval(v interface{}) string {
	switch t := v.(type) {
	case string:
		return t
	case []byte:
		return string(t)
	case error:
		return t.Error()
	case fmt.Stringer:
		return t.String()
	default:
		return fmt.Sprintf("%v", v)
	}
}

// toInt64 is Sprig's conversion for arithmetic.
func toInt64(v interface{}) int64 {
	switch t := v.(type) {
	case int:
		return int64(t)
	case int64:
		return t
	case float64:
		return int64(t)
	case string:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return 0
		}
		return n
	case bool:
		if t {
			return 1
		}
		return 0
	case nil:
		return 0
	}
	return 0
}

// empty is Sprig's: the zero value of its kind (nil, "", 0, false, empty
// list or map).
func empty(v interface{}) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case bool:
		return !t
	case float64:
		return t == 0
	case int:
		return t == 0
	case int64:
		return t == 0
	case []interface{}:
		return len(t) == 0
	case map[string]interface{}:
		return len(t) == 0
	}
	return false
}

var plainScalar = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./-]*$`)

// yamlScalar writes a scalar that reads back as the same value and type.
func yamlScalar(v interface{}) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(t)
	case float64:
		if t == float64(int64(t)) {
			return strconv.FormatInt(int64(t), 10)
		}
		return strconv.FormatFloat(t, 'g', -1, 64)
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case string:
		switch strings.ToLower(t) {
		case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
			return strconv.Quote(t)
		}
		if plainScalar.MatchString(t) {
			return t
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(t) // a JSON string is a YAML double-quoted scalar
		return strings.TrimSuffix(b.String(), "\n")
	}
	return strconv.Quote(strval(v))
}

func writeYAML(b *strings.Builder, v interface{}, indent int) {
	pad := strings.Repeat(" ", indent)
	switch t := v.(type) {
	case map[string]interface{}:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // as Helm's toYaml
		for _, k := range keys {
			b.WriteString(pad + yamlScalar(k) + ":")
			writeValue(b, t[k], indent)
		}
	case []interface{}:
		for _, item := range t {
			b.WriteString(pad + "-")
			if m, ok := item.(map[string]interface{}); ok && len(m) > 0 {
				// The first key on the dash's line, the rest below it.
				var inner strings.Builder
				writeYAML(&inner, m, indent+2)
				b.WriteString(" " + strings.TrimPrefix(inner.String(), pad+"  "))
				continue
			}
			writeValue(b, item, indent)
		}
	}
}

// writeValue writes what follows "key:" or "-".
func writeValue(b *strings.Builder, v interface{}, indent int) {
	switch t := v.(type) {
	case map[string]interface{}:
		if len(t) == 0 {
			b.WriteString(" {}\n")
			return
		}
		b.WriteString("\n")
		writeYAML(b, t, indent+2)
	case []interface{}:
		if len(t) == 0 {
			b.WriteString(" []\n")
			return
		}
		b.WriteString("\n")
		writeYAML(b, t, indent+2)
	default:
		b.WriteString(" " + yamlScalar(v) + "\n")
	}
}

// toYaml is Helm's: block YAML, keys sorted, no trailing newline.
func toYaml(v interface{}) string {
	switch t := v.(type) {
	case map[string]interface{}:
		if len(t) == 0 {
			return "{}"
		}
	case []interface{}:
		if len(t) == 0 {
			return "[]"
		}
	default:
		return yamlScalar(v)
	}
	var b strings.Builder
	writeYAML(&b, v, 0)
	return strings.TrimSuffix(b.String(), "\n")
}

func indent(spaces int, v string) string {
	pad := strings.Repeat(" ", spaces)
	return pad + strings.Replace(v, "\n", "\n"+pad, -1)
}

func randAlphaNum(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	out := make([]byte, n)
	for i := range out {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		out[i] = alphabet[k.Int64()]
	}
	return string(out), nil
}

func funcMap(t **template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			var b strings.Builder
			if err := (*t).ExecuteTemplate(&b, name, data); err != nil {
				return "", err
			}
			return b.String(), nil
		},
		"toYaml":  toYaml,
		"indent":  indent,
		"nindent": func(n int, v string) string { return "\n" + indent(n, v) },
		"quote": func(vs ...interface{}) string {
			out := []string{}
			for _, v := range vs {
				if v != nil {
					out = append(out, strconv.Quote(strval(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"empty": empty,
		"required": func(msg string, v interface{}) (interface{}, error) {
			if v == nil {
				return nil, errors.New(msg)
			}
			if s, ok := v.(string); ok && s == "" {
				return nil, errors.New(msg)
			}
			return v, nil
		},
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
		"mul": func(a interface{}, v ...interface{}) int64 {
			p := toInt64(a)
			for _, x := range v {
				p *= toInt64(x)
			}
			return p
		},
		"add": func(v ...interface{}) int64 {
			var s int64
			for _, x := range v {
				s += toInt64(x)
			}
			return s
		},
		"int":      func(v interface{}) int { return int(toInt64(v)) },
		"toString": strval,
		"trunc": func(n int, s string) string {
			if n >= 0 && len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix":   func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"randAlphaNum": randAlphaNum,
	}
}

func run() error {
	var values multiFlag
	chartDir := flag.String("chart", "", "chart directory")
	chartJSON := flag.String("chart-json", "", "the chart's Chart.yaml as JSON")
	name := flag.String("name", "hvd", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	flag.Var(&values, "values", "values as JSON (repeatable; later ones win)")
	flag.Parse()
	if *chartDir == "" || *chartJSON == "" || len(values) == 0 {
		return errors.New("usage: render -chart DIR -chart-json F -values F [-values F...] [-name R] [-namespace NS]")
	}
	meta, err := readJSON(*chartJSON)
	if err != nil {
		return err
	}
	merged := map[string]interface{}{}
	for _, path := range values {
		v, err := readJSON(path)
		if err != nil {
			return err
		}
		merged = merge(merged, v)
	}
	// .Chart's fields are capitalised, as Helm's Chart.Metadata.
	chart := map[string]interface{}{}
	for k, v := range meta {
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	data := map[string]interface{}{
		"Values": merged,
		"Chart":  chart,
		"Release": map[string]interface{}{
			"Name": *name, "Namespace": *namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Files": Files{dir: *chartDir},
	}

	paths, err := filepath.Glob(filepath.Join(*chartDir, "templates", "*"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	var t *template.Template
	t = template.New("chart").Funcs(funcMap(&t)).Option("missingkey=zero")
	var rendered []string
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(filepath.Join(filepath.Base(*chartDir), "templates", filepath.Base(p)))
		if _, err := t.New(rel).Parse(string(text)); err != nil {
			return err
		}
		if !strings.HasPrefix(filepath.Base(p), "_") && strings.HasSuffix(p, ".yaml") {
			rendered = append(rendered, rel)
		}
	}
	var out strings.Builder
	for _, rel := range rendered {
		var b strings.Builder
		if err := t.ExecuteTemplate(&b, rel, data); err != nil {
			return err
		}
		// Helm's non-strict rendering: a missing value prints nothing.
		text := strings.ReplaceAll(b.String(), "<no value>", "")
		if strings.TrimSpace(text) == "" {
			continue
		}
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			out.WriteString("---\n# Source: " + rel + "\n" + strings.TrimLeft(doc, "\n"))
			if !strings.HasSuffix(doc, "\n") {
				out.WriteString("\n")
			}
		}
	}
	_, err = os.Stdout.WriteString(out.String())
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}
