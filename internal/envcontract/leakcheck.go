package envcontract

// SecretLeakScript is a shell training command for tests: it prints, per
// rank, "secrets-leak=none" unless the job's secrets can be read in its
// parent's (the executor's) initial environment, its own, or the Hadoop
// credentials file it is given, and names its parent's command line.
const SecretLeakScript = `leak=none
for f in /proc/$PPID/environ /proc/self/environ; do
  if tr '\0' '\n' <"$f" | grep -q -e '^` + JobSecret + `=' -e '^` + JobTLS + `='; then leak=$f; fi
done
if [ -n "$HADOOP_TOKEN_FILE_LOCATION" ] && grep -q -a 'spindle.env.' "$HADOOP_TOKEN_FILE_LOCATION"; then leak=$HADOOP_TOKEN_FILE_LOCATION; fi
echo "secrets-leak=$leak parent=$(tr '\0' ' ' </proc/$PPID/cmdline)"`
