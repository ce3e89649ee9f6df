// Package policytest holds the policy scenarios every policy store is
// tested with (Canary, HeaderRoute, LiveTimeoutAndRetry, Fault,
// BadPolicyKept, Outage) and what they run on: real Fleet servers of
// service "Echo" on the in-process network, two tagged v1 and two v2,
// each answering with its name, and an XClient applying the policy a
// Watcher follows in the store under test (Fixture). The registry
// modules' tests call the scenarios with their PolicyStore.
package policytest
