package gateway

// gzip for the gRPC route: grpc-go decompresses requests and compresses
// answers (grpc-encoding: gzip) with the compressors registered in its
// encoding registry; Connect and gRPC-Web get gzip from connect-go.
import _ "google.golang.org/grpc/encoding/gzip"
