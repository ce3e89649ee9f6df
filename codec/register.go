package codec

func init() {
	Register(Raw, RawCodec{})
	Register(JSON, JSONCodec{})
	Register(Protobuf, ProtobufCodec{})
	Register(MsgPack, MsgPackCodec{})
	Register(Gob, GobCodec{})
	Register(Gencode, GencodeCodec{})
}
