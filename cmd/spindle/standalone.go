package main

import "github.com/urfave/cli/v2"

// Placeholders until the standalone cluster manager lands.
func statusCommand() *cli.Command { return &cli.Command{Name: "status", Hidden: true} }
func killCommand() *cli.Command   { return &cli.Command{Name: "kill", Hidden: true} }
func masterCommand() *cli.Command { return &cli.Command{Name: "master", Hidden: true} }
func workerCommand() *cli.Command { return &cli.Command{Name: "worker", Hidden: true} }
