package codec_test

import (
	"fmt"

	"github.com/fleetrpc/fleet/codec"
)

func ExampleGet() {
	type Args struct {
		A, B int
	}
	c := codec.Get(codec.JSON)
	b, err := c.Marshal(Args{A: 7, B: 8})
	if err != nil {
		panic(err)
	}
	var back Args
	if err := c.Unmarshal(b, &back); err != nil {
		panic(err)
	}
	fmt.Println(c.Name(), string(b), back.A*back.B)
	// Output: json {"A":7,"B":8} 56
}

func ExampleMarshalAppend() {
	// Encode after a 4-byte header, into one buffer.
	buf := []byte{0, 0, 0, 0}
	buf, err := codec.MarshalAppend(codec.Get(codec.MsgPack), buf, map[string]int{"n": 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", buf)
	// Output: 00 00 00 00 81 a1 6e 01
}
