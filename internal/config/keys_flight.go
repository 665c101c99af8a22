package config

// Names of the keys of Arrow Flight inputs (--input grpc://host:port/path)
// and of pushed input (--input flight-put:).
const (
	KeyFlightToken        = "spindle.flight.token"
	KeyFlightCAFile       = "spindle.flight.tls.caFile"
	KeyFlightPutSchema    = "spindle.flight.put.schema"
	KeyFlightPutRows      = "spindle.flight.put.rows"
	KeyFlightPutBuffer    = "spindle.flight.put.bufferMemory"
	KeyFlightPutTokenFile = "spindle.flight.put.tokenFile"
	KeyFlightPutTurns     = "spindle.flight.put.turnEpochs"
)

// flightKeys reach Arrow Flight services and shape pushed input.
var flightKeys = []Key{
	{Name: KeyFlightToken, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "Bearer token sent to the Arrow Flight services of grpc:// inputs (authorization: Bearer TOKEN); never logged, hidden on the job page. Put it in a file only you can read (--properties-file), not on the command line."},
	{Name: KeyFlightCAFile, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "PEM file of the certificate authority that signed the grpc+tls:// Flight services' certificates; empty uses the system's roots."},
	{Name: KeyFlightPutSchema, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "The schema producers must push into a flight-put: input, as name:type pairs (id:int64,x:float32,label:float32; types bool, int8-64, uint8-64, float32, float64, string, binary, date32). Empty takes the first producer's schema, which every other producer must then match; the job waits for it before starting its executors."},
	{Name: KeyFlightPutRows, Default: "0", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "The rows a flight-put: input holds: once that many are pushed the input ends, without an end-of-input action, and a batch that would go past it is refused. 0: the input ends with end-of-input."},
	{Name: KeyFlightPutBuffer, Default: "64m", Kind: Bytes, Min: 16 << 20, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "Pushed rows the driver holds for ranks that have not taken them yet; producers are slowed (their DoPut waits) while it is full. At least 16m, more than gRPC buffers in one rank's stream, so that ranks in lockstep never wait for each other's rows."},
	{Name: KeyFlightPutTokenFile, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "File the driver writes the producers' token of a flight-put: input to (mode 0600, removed when the job ends). Empty: spindle-JOBID.flight-put.token in the system's temporary directory. submit prints its path."},
	{Name: KeyFlightPutTurns, Default: "0", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "A warm session's pushed input (spindle.Session with input flight-put:, which sets it): every N epochs are one turn, one session job's, fed by streams named turn/T/... (T: the session job's number) and ended by end-of-input with body T; a turn's first epoch reads its rows as they are pushed, its later ones come from the executors' cache or spill. 0: one input for the whole job."},
}
