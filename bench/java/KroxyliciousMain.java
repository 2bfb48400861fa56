/*
 * KroxyliciousMain — starts the Kroxylicious proxy engine
 * (io.kroxylicious:kroxylicious-runtime) from a YAML configuration file, as
 * the kroxylicious-app launcher does (parse, validate, start, block until
 * the JVM is asked to stop), without its command-line parsing. scripts/bench
 * uses it because the Maven registry these machines reach serves the runtime
 * but not the app (bench/kroxylicious/pom.xml).
 *
 *   java -cp LIBS/*:DIR KroxyliciousMain CONFIG.yaml
 *
 * Prints "READY" once every virtual cluster's ports are bound. SIGTERM (or
 * SIGINT) closes the proxy through the JVM's shutdown hook, like the app.
 */
import java.nio.file.Files;
import java.nio.file.Path;

import io.kroxylicious.proxy.KafkaProxy;
import io.kroxylicious.proxy.config.ConfigParser;
import io.kroxylicious.proxy.config.Configuration;
import io.kroxylicious.proxy.internal.config.Features;

public final class KroxyliciousMain {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: KroxyliciousMain CONFIG.yaml");
            System.exit(2);
        }
        ConfigParser parser = new ConfigParser();
        Configuration config = parser.parseConfiguration(Files.readString(Path.of(args[0])));
        KafkaProxy proxy = new KafkaProxy(parser, config, Features.defaultFeatures());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                proxy.close();
            }
            catch (Exception e) {
                System.err.println("KroxyliciousMain: close: " + e);
            }
        }, "shutdown"));
        proxy.startup();
        System.out.println("READY");
        System.out.flush();
        proxy.block();
    }
}
