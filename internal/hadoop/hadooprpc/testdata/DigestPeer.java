import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.sasl.AuthorizeCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;
import javax.security.sasl.SaslServer;

/**
 * One end of a DIGEST-MD5 exchange with the JDK's own implementation, the
 * one Hadoop uses for TOKEN authentication, driven over stdin and stdout by
 * hadooprpc's interoperability test. Frames are a kind byte ('M' a
 * message, 'E' an error text) and a 4-byte big-endian length.
 *
 * <p>Usage: DigestPeer server QOP USER PASSWORD, or DigestPeer client QOP
 * CIPHER USER PASSWORD [AUTHZID] (CIPHER "-" lets the client choose; an
 * AUTHZID is sent as the authorization id, as Hadoop's data-transfer
 * clients send the token's user name). After the
 * exchange it sends "qop strength" as negotiated, then answers every wrapped
 * message m with the wrapped "echo:" + m until an empty frame.
 */
public final class DigestPeer {
    private static final DataInputStream in = new DataInputStream(System.in);
    private static final DataOutputStream out = new DataOutputStream(System.out);

    public static void main(String[] args) throws Exception {
        try {
            run(args);
        } catch (Exception e) {
            send('E', String.valueOf(e).getBytes(StandardCharsets.UTF_8));
        }
        out.flush();
    }

    private static void run(String[] args) throws Exception {
        boolean server = args[0].equals("server");
        Map<String, String> props = new HashMap<>();
        props.put(Sasl.QOP, args[1]);
        String user = args[server ? 2 : 3];
        char[] password = args[server ? 3 : 4].toCharArray();
        CallbackHandler cbh = callbacks -> {
            for (Callback cb : callbacks) {
                if (cb instanceof NameCallback) {
                    ((NameCallback) cb).setName(user);
                } else if (cb instanceof PasswordCallback) {
                    ((PasswordCallback) cb).setPassword(password);
                } else if (cb instanceof RealmCallback) {
                    RealmCallback rc = (RealmCallback) cb;
                    rc.setText(rc.getDefaultText());
                } else if (cb instanceof AuthorizeCallback) {
                    AuthorizeCallback ac = (AuthorizeCallback) cb;
                    ac.setAuthorized(ac.getAuthenticationID().equals(ac.getAuthorizationID()));
                    ac.setAuthorizedID(ac.getAuthorizationID());
                }
            }
        };
        Wrapper w;
        if (server) {
            // As Hadoop's token servers: no protocol, server name "default".
            SaslServer s = Sasl.createSaslServer("DIGEST-MD5", "", "default", props, cbh);
            send('M', s.evaluateResponse(new byte[0]));
            send('M', s.evaluateResponse(read()));
            if (!s.isComplete()) {
                throw new IllegalStateException("server not complete");
            }
            info(s.getNegotiatedProperty(Sasl.QOP), s.getNegotiatedProperty(Sasl.STRENGTH));
            w = new Wrapper() {
                public byte[] wrap(byte[] b) throws Exception { return s.wrap(b, 0, b.length); }
                public byte[] unwrap(byte[] b) throws Exception { return s.unwrap(b, 0, b.length); }
            };
        } else {
            if (!args[2].equals("-")) {
                props.put("com.sun.security.sasl.digest.cipher", args[2]);
            }
            String authzid = args.length > 5 ? args[5] : null;
            SaslClient c = Sasl.createSaslClient(new String[] {"DIGEST-MD5"}, authzid, "", "default", props, cbh);
            send('M', c.evaluateChallenge(read()));
            c.evaluateChallenge(read());
            if (!c.isComplete()) {
                throw new IllegalStateException("client not complete");
            }
            info(c.getNegotiatedProperty(Sasl.QOP), c.getNegotiatedProperty(Sasl.STRENGTH));
            w = new Wrapper() {
                public byte[] wrap(byte[] b) throws Exception { return c.wrap(b, 0, b.length); }
                public byte[] unwrap(byte[] b) throws Exception { return c.unwrap(b, 0, b.length); }
            };
        }
        for (byte[] m = read(); m.length > 0; m = read()) {
            byte[] got = w.unwrap(m);
            byte[] reply = new byte[5 + got.length];
            System.arraycopy("echo:".getBytes(StandardCharsets.UTF_8), 0, reply, 0, 5);
            System.arraycopy(got, 0, reply, 5, got.length);
            send('M', w.wrap(reply));
        }
    }

    private interface Wrapper {
        byte[] wrap(byte[] b) throws Exception;
        byte[] unwrap(byte[] b) throws Exception;
    }

    private static void info(Object qop, Object cipher) throws IOException {
        send('M', (qop + " " + cipher).getBytes(StandardCharsets.UTF_8));
    }

    private static byte[] read() throws IOException {
        byte[] b = new byte[in.readInt()];
        in.readFully(b);
        return b;
    }

    private static void send(char kind, byte[] b) throws IOException {
        out.writeByte(kind);
        out.writeInt(b == null ? 0 : b.length);
        if (b != null) {
            out.write(b);
        }
        out.flush();
    }
}
