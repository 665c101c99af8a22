package am

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadooprpc"
)

// NMProtocolName is ContainerManagementProtocol's name on the wire.
const NMProtocolName = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB"

// nmCall makes one ContainerManagementProtocol call on a NodeManager,
// authenticated with the node's NMToken.
func nmCall(ctx context.Context, node string, tok hadooprpc.Token, method string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := hadooprpc.Dial(ctx, hadooprpc.ClientConfig{Addr: node, Protocol: NMProtocolName, SASL: hadooprpc.TokenAuth{Token: tok}})
	if err != nil {
		return fmt.Errorf("connect to NodeManager %s: %w", node, err)
	}
	defer c.Close()
	return c.Call(ctx, method, req, resp)
}
