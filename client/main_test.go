package client_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childServerEnv) != "" {
		runChildServer() // the test binary re-executed as a server process
		return
	}
	goleak.VerifyTestMain(m)
}
