package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
	"github.com/fleetrpc/fleet/registry/etcd"
	"github.com/fleetrpc/fleet/registry/nats"
	"github.com/fleetrpc/fleet/registry/redis"
	"github.com/fleetrpc/fleet/registry/zookeeper"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
)

type policyFlags struct {
	registry string
	file     string
	yaml     bool
	timeout  time.Duration
}

func init() {
	var f policyFlags
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Read, write, compare and check traffic policies (docs/policy.md)",
		Long: `policy works on the traffic policy documents Fleet clients and servers
follow (docs/policy.md): one per service, held in a registry (--registry:
etcd /fleet/policies/SERVICE, ZooKeeper /fleet/policies/SERVICE, Redis
fleet:policies:SERVICE, NATS bucket fleet_policies) or in a file (--file).

  fleet policy validate FILE...        check documents; exit 2 if one is bad
  fleet policy get SERVICE             print the document in force
  fleet policy set SERVICE FILE        check FILE, then store it
  fleet policy diff SERVICE FILE       show how FILE differs from the stored one`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.registry, "registry", "etcd://"+defaultRegistryAddr, "the registry holding the policies: etcd://, zookeeper://, redis:// or nats://host:port")
	pf.StringVar(&f.file, "file", "", "use this policy file instead of the registry")
	pf.BoolVar(&f.yaml, "yaml", false, "print documents as YAML (default JSON)")
	pf.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on each registry request")

	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE...",
		Short: "Check policy documents (JSON or YAML) without applying them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return policyValidate(cmd.OutOrStdout(), args)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "get SERVICE",
		Short: "Print a service's policy document",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withPolicyStore(cmd.Context(), f, func(ctx context.Context, s policy.Store) error {
				return policyGet(ctx, cmd.OutOrStdout(), s, args[0], f.yaml)
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "set SERVICE FILE",
		Short: "Check a policy document and store it for SERVICE (clients and servers apply it at once)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withPolicyStore(cmd.Context(), f, func(ctx context.Context, s policy.Store) error {
				return policySet(ctx, cmd.OutOrStdout(), s, args[0], args[1])
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "diff SERVICE FILE",
		Short: "Show how FILE differs from SERVICE's stored document (exit 1 when they differ)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withPolicyStore(cmd.Context(), f, func(ctx context.Context, s policy.Store) error {
				return policyDiff(ctx, cmd.OutOrStdout(), s, args[0], args[1], f.yaml)
			})
		},
	})
	rootCmd.AddCommand(cmd)
}

// withPolicyStore opens the store the flags name and runs fn with it.
func withPolicyStore(ctx context.Context, f policyFlags, fn func(context.Context, policy.Store) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if f.file != "" {
		return fn(ctx, policy.File{Path: f.file})
	}
	s, closeStore, err := openPolicyStore(f.registry, f.timeout)
	if err != nil {
		return err
	}
	defer closeStore()
	return fn(ctx, s)
}

// openPolicyStore opens the policy store of the registry at rawURL
// (etcd://, zookeeper://, redis://, nats://host:port), with requests
// bounded by timeout.
func openPolicyStore(rawURL string, timeout time.Duration) (policy.Store, func(), error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, nil, usagef("--registry %q: want scheme://host:port (etcd, zookeeper, redis, nats), or use --file", rawURL)
	}
	type store interface {
		policy.Store
		Close() error
	}
	var s store
	switch u.Scheme {
	case "etcd":
		s, err = etcd.NewPolicyStore(etcd.Config{Endpoints: []string{u.Host}, DialTimeout: timeout, RequestTimeout: timeout, Logger: quietLogger()})
	case "zookeeper":
		s, err = zookeeper.NewPolicyStore(zookeeper.Config{Servers: []string{u.Host}, Logger: quietLogger()})
	case "redis":
		s, err = redis.NewPolicyStore(redis.Config{Addr: u.Host, Logger: quietLogger()})
	case "nats":
		s, err = nats.NewPolicyStore(nats.Config{URL: "nats://" + u.Host, RequestTimeout: timeout, Logger: quietLogger()})
	default:
		return nil, nil, usagef("--registry %q: unknown scheme %q (etcd, zookeeper, redis, nats)", rawURL, u.Scheme)
	}
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}

// readPolicyFile reads and checks a document file; a bad one is a usage
// error (exit status 2).
func readPolicyFile(path string) ([]byte, *policy.Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	p, err := policy.Parse(b)
	if err != nil {
		return nil, nil, &usageError{fmt.Errorf("%s: %w", path, err)}
	}
	return b, p, nil
}

func policyValidate(w io.Writer, files []string) error {
	bad := 0
	for _, path := range files {
		_, p, err := readPolicyFile(path)
		if err != nil {
			fmt.Fprintln(w, err)
			bad++
			continue
		}
		d := p.Document()
		fmt.Fprintf(w, "%s: ok: service %s, version %s, %d subsets, %d routes, %d limits\n",
			path, d.Service, d.Version, len(d.Subsets), len(d.Routes), len(d.Limits))
	}
	if bad > 0 {
		return usagef("%d of %d documents are invalid", bad, len(files))
	}
	return nil
}

// encodePolicy renders doc canonically (its fields in schema order), as
// JSON or YAML.
func encodePolicy(doc *policy.Document, asYAML bool) ([]byte, error) {
	if asYAML {
		return doc.YAML()
	}
	b, err := doc.JSON()
	return append(b, '\n'), err
}

func policyGet(ctx context.Context, w io.Writer, s policy.Store, service string, asYAML bool) error {
	raw, err := s.Get(ctx, service)
	if err != nil {
		return err
	}
	doc, err := policy.Decode(raw)
	if err != nil {
		// Show what is stored even when it does not decode.
		w.Write(raw)
		return fmt.Errorf("the stored document is bad (clients keep their last good one): %w", err)
	}
	out, err := encodePolicy(doc, asYAML)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

func policySet(ctx context.Context, w io.Writer, s policy.Store, service, path string) error {
	raw, p, err := readPolicyFile(path)
	if err != nil {
		return err
	}
	if p.Service() != service {
		return usagef("%s is a policy for service %q, not %q", path, p.Service(), service)
	}
	if err := s.Put(ctx, service, bytes.TrimSpace(raw)); err != nil {
		return err
	}
	fmt.Fprintf(w, "set the policy of %s to version %s\n", service, p.Version())
	return nil
}

// errDiffers: diff found differences (exit status 1, like diff(1)).
var errDiffers = fmt.Errorf("the documents differ")

func policyDiff(ctx context.Context, w io.Writer, s policy.Store, service, path string, asYAML bool) error {
	_, p, err := readPolicyFile(path)
	if err != nil {
		return err
	}
	var stored []byte
	raw, err := s.Get(ctx, service)
	switch {
	case fleet.CodeOf(err) == fleet.NotFound:
	case err != nil:
		return err
	default:
		doc, err := policy.Decode(raw)
		if err != nil {
			stored = raw
		} else if stored, err = encodePolicy(doc, asYAML); err != nil {
			return err
		}
	}
	proposed, err := encodePolicy(p.Document(), asYAML)
	if err != nil {
		return err
	}
	if bytes.Equal(stored, proposed) {
		fmt.Fprintln(w, "no difference")
		return nil
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(stored)), B: difflib.SplitLines(string(proposed)),
		FromFile: "stored/" + service, ToFile: path, Context: 3,
	})
	if err != nil {
		return err
	}
	fmt.Fprint(w, text)
	return errDiffers
}
