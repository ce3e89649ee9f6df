package mdns

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetrpc/fleet/registry"
)

// maxTXT is the longest string a DNS TXT record can hold.
const maxTXT = 255

// EncodeTXT returns the DNS-SD TXT strings (RFC 6763 section 6) that
// carry in: "txtvers=1", then "key=value" for every field that is not
// zero, under the instance's JSON field names:
//
//	service, addr, network, group, version, state  the string
//	weight                                         decimal
//	lat, lon                                       shortest decimal that round-trips
//	tags                                           JSON array of strings
//	load                                           JSON object, as in the record
//	meta.<key>                                     one string per Meta entry
//
// It fails when a string would exceed 255 bytes, the limit of a TXT
// string, or a Meta key is empty or holds '='.
func EncodeTXT(in registry.Instance) ([]string, error) {
	txt := []string{"txtvers=1"}
	add := func(k, v string) {
		if v != "" {
			txt = append(txt, k+"="+v)
		}
	}
	add("service", in.Service)
	add("addr", in.Addr)
	add("network", in.Network)
	if in.Weight != 0 {
		add("weight", strconv.Itoa(in.Weight))
	}
	add("group", in.Group)
	add("version", in.Version)
	if len(in.Tags) > 0 {
		b, err := json.Marshal(in.Tags)
		if err != nil {
			return nil, fmt.Errorf("mdns: tags: %w", err)
		}
		add("tags", string(b))
	}
	if in.Latitude != 0 {
		add("lat", strconv.FormatFloat(in.Latitude, 'g', -1, 64))
	}
	if in.Longitude != 0 {
		add("lon", strconv.FormatFloat(in.Longitude, 'g', -1, 64))
	}
	add("state", string(in.State))
	if in.Load != (registry.Load{}) {
		b, err := json.Marshal(in.Load)
		if err != nil {
			return nil, fmt.Errorf("mdns: load: %w", err)
		}
		add("load", string(b))
	}
	keys := make([]string, 0, len(in.Meta))
	for k := range in.Meta {
		if k == "" || strings.ContainsRune(k, '=') {
			return nil, fmt.Errorf("mdns: meta key %q is empty or holds '='", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		txt = append(txt, "meta."+k+"="+in.Meta[k])
	}
	for _, s := range txt {
		if len(s) > maxTXT {
			k, _, _ := strings.Cut(s, "=")
			return nil, fmt.Errorf("mdns: TXT string for %q is %d bytes; the limit is %d", k, len(s), maxTXT)
		}
	}
	return txt, nil
}

// DecodeTXT parses TXT strings written by EncodeTXT back into an
// instance. Keys other than meta.<key> are compared without regard to
// case and, as RFC 6763 says, only the first occurrence of a key counts;
// unknown keys and strings without '=' are ignored. It fails when
// txtvers is missing or not 1, a value does not parse, or the result is
// not a valid instance.
func DecodeTXT(txt []string) (registry.Instance, error) {
	var in registry.Instance
	seen := make(map[string]bool, len(txt))
	version := ""
	for _, s := range txt {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			continue
		}
		if mk, isMeta := strings.CutPrefix(k, "meta."); isMeta && mk != "" {
			if in.Meta == nil {
				in.Meta = make(map[string]string)
			}
			if _, dup := in.Meta[mk]; !dup {
				in.Meta[mk] = v
			}
			continue
		}
		k = strings.ToLower(k)
		if seen[k] {
			continue
		}
		seen[k] = true
		var err error
		switch k {
		case "txtvers":
			version = v
		case "service":
			in.Service = v
		case "addr":
			in.Addr = v
		case "network":
			in.Network = v
		case "weight":
			in.Weight, err = strconv.Atoi(v)
		case "group":
			in.Group = v
		case "version":
			in.Version = v
		case "tags":
			err = json.Unmarshal([]byte(v), &in.Tags)
		case "lat":
			in.Latitude, err = strconv.ParseFloat(v, 64)
		case "lon":
			in.Longitude, err = strconv.ParseFloat(v, 64)
		case "state":
			in.State = registry.State(v)
		case "load":
			err = json.Unmarshal([]byte(v), &in.Load)
		}
		if err != nil {
			return registry.Instance{}, fmt.Errorf("mdns: TXT %q: %w", k, err)
		}
	}
	if version != "1" {
		return registry.Instance{}, errors.New("mdns: TXT strings without txtvers=1: not a Fleet instance")
	}
	if err := in.Validate(); err != nil {
		return registry.Instance{}, fmt.Errorf("mdns: %w", err)
	}
	return in, nil
}
