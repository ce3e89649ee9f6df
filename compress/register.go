package compress

func init() {
	Register(Gzip, GzipCompressor{})
	Register(Snappy, SnappyCompressor{})
	Register(Zstd, ZstdCompressor{})
}
