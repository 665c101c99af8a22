// Package hadooprpc speaks Hadoop IPC, the framing under every Hadoop
// protobuf RPC protocol (ClientProtocol to the namenode, the YARN
// protocols, and so on), from both ends: Server dispatches calls to
// registered Services, Client makes calls.
//
// A connection opens with a 7-byte header ("hrpc", version 9, service class,
// auth protocol), optionally runs a SASL exchange, then sends an
// IpcConnectionContextProto naming the user. Every later packet is a
// big-endian uint32 length followed by varint-delimited protobuf messages:
// RpcRequestHeaderProto, RequestHeaderProto and the request on the way in;
// RpcResponseHeaderProto and the response (absent on error) on the way out.
// A failed call carries the Java exception class name, which clients map to
// their own errors, so servers raise errors as *RemoteError.
//
// Authentication: "simple" (the connection context names the user), and
// Hadoop's TOKEN authentication, SASL DIGEST-MD5 with a token's identifier
// and password, on both ends (TokenAuth for clients, TokenServer for
// servers): how ApplicationMasters reach the ResourceManager (AMRMToken) and
// NodeManagers (NMToken), and how containers use delegation tokens; and
// Kerberos, SASL GSSAPI (KerberosAuth, KerberosServer). Both run at each
// level of hadoop.rpc.protection: with integrity or privacy every message
// after the handshake travels signed or sealed inside a SASL WRAP message,
// as an RFC 4121 wrap token (Kerberos) or with an RFC 2831 HMAC-MD5 and
// cipher (DIGEST-MD5).
//
// Datanodes take the same DIGEST-MD5, with block tokens, in the SASL
// handshake that opens data-transfer connections under
// dfs.data.transfer.protection: DataTransferServer for the datanode side,
// DataTransferHandshake for the client side, and DataTransferDial to give
// it to a client through its dial hook (colinmarc/hdfs's datanode
// connections). ServerMechanisms offers several methods on one server (a
// secure namenode takes KERBEROS and TOKEN). SASLDial gives third-party
// clients that only speak simple authentication (colinmarc/hdfs's namenode
// connections) any of these through their dial hook.
//
// FailoverClient follows an HA group (namenodes, ResourceManagers) across
// StandbyException and broken connections; Credentials reads and writes
// Hadoop's token storage files (HADOOP_TOKEN_FILE_LOCATION), versions 0 and 1.
package hadooprpc
