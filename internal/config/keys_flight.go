package config

// Names of the keys of Arrow Flight inputs (--input grpc://host:port/path).
const (
	KeyFlightToken  = "spindle.flight.token"
	KeyFlightCAFile = "spindle.flight.tls.caFile"
)

// flightKeys reach Arrow Flight services.
var flightKeys = []Key{
	{Name: KeyFlightToken, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "Bearer token sent to the Arrow Flight services of grpc:// inputs (authorization: Bearer TOKEN); never logged, hidden on the job page. Put it in a file only you can read (--properties-file), not on the command line."},
	{Name: KeyFlightCAFile, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "PEM file of the certificate authority that signed the grpc+tls:// Flight services' certificates; empty uses the system's roots."},
}
