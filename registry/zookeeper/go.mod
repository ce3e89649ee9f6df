module github.com/fleetrpc/fleet/registry/zookeeper

go 1.26.8

require (
	github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000
	github.com/go-zookeeper/zk v1.0.4
	go.uber.org/goleak v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

replace github.com/fleetrpc/fleet => ../..
