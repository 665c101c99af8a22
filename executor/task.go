package executor

import "github.com/spindle-ml/spindle/driver/driverpb"

// Task is what the driver asks an executor to do: run one training
// process and feed it. The contract is the driver's control-plane message
// (driver/driverpb/task.proto), which neither side owns; the driver sends
// it in the Register reply.
type Task = driverpb.Task

// FeedTask says how to feed the training process.
type FeedTask = driverpb.FeedTask
