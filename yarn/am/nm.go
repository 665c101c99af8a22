package am

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// NMProtocolName is ContainerManagementProtocol's name on the wire.
const NMProtocolName = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB"

// nmCall makes one ContainerManagementProtocol call on a NodeManager,
// authenticated with the node's NMToken at hadoop.rpc.protection
// protection, bounded by timeout.
func nmCall(ctx context.Context, node string, tok hadooprpc.Token, protection string, timeout time.Duration, method string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := hadooprpc.Dial(ctx, hadooprpc.ClientConfig{Addr: node, Protocol: NMProtocolName, SASL: hadooprpc.TokenAuth{Token: tok, Protection: protection}})
	if err != nil {
		return fmt.Errorf("connect to NodeManager %s: %w", node, err)
	}
	defer c.Close()
	return c.Call(ctx, method, req, resp)
}

// Attempt returns the application attempt a container belongs to, from
// its id (container_[eEPOCH_]CLUSTERTS_APP_ATTEMPT_SEQ, as YARN puts it in
// CONTAINER_ID), or 0 when id is not a container id.
func Attempt(id string) int {
	parts := strings.Split(id, "_")
	if len(parts) > 0 && parts[0] == "container" {
		parts = parts[1:]
	} else {
		return 0
	}
	if len(parts) > 0 && strings.HasPrefix(parts[0], "e") {
		parts = parts[1:]
	}
	if len(parts) != 4 {
		return 0
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return 0
	}
	return n
}
