package dev.tickwheel.worker;

/** A server's text made fit for a log line. */
final class ServerText {
  /** The most characters of a server's text a log line repeats. */
  static final int SAID_CHARS = 300;

  private ServerText() {}

  /**
   * {@code text} from a server fit for a log line: its first line, printable, at most {@link
   * #SAID_CHARS} characters (then "..."), the worker's credential masked (a server may echo it).
   */
  static String said(String text, String credential) {
    if (text == null) {
      return "";
    }
    // A server's text may run to megabytes: look at what a line can show.
    int limit = SAID_CHARS + (credential == null ? 0 : credential.length()) + 2;
    if (text.length() > 2 * limit) {
      text = text.substring(0, 2 * limit);
    }
    int newline = indexOfNewline(text);
    if (newline >= 0) {
      text = text.substring(0, newline);
    }
    if (credential != null && !credential.isEmpty()) {
      text = text.replace(credential, "***");
    }
    StringBuilder out = new StringBuilder(Math.min(text.length(), SAID_CHARS + 3));
    int n = 0;
    for (int i = 0; i < text.length(); ) {
      int c = text.codePointAt(i);
      i += Character.charCount(c);
      if (n == SAID_CHARS) {
        out.append("...");
        break;
      }
      out.appendCodePoint(printable(c) ? c : '?');
      n++;
    }
    return out.toString();
  }

  /** {@code text} cut to at most {@code limit} characters (code points). */
  static String cut(String text, int limit) {
    if (text.length() <= limit) {
      return text;
    }
    int end = text.offsetByCodePoints(0, Math.min(limit, text.codePointCount(0, text.length())));
    return text.substring(0, end);
  }

  /** The characters (code points) of {@code text}, counted only past {@code limit} UTF-16 units. */
  static int characters(String text, int limit) {
    return text.length() <= limit ? text.length() : text.codePointCount(0, text.length());
  }

  private static int indexOfNewline(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '\n' || c == '\r') {
        return i;
      }
    }
    return -1;
  }

  private static boolean printable(int c) {
    if (Character.isISOControl(c) || Character.isSurrogate((char) c) && c <= 0xFFFF) {
      return false;
    }
    return switch (Character.getType(c)) {
      case Character.UNASSIGNED,
          Character.LINE_SEPARATOR,
          Character.PARAGRAPH_SEPARATOR,
          Character.FORMAT,
          Character.PRIVATE_USE,
          Character.SURROGATE -> false;
      default -> true;
    };
  }
}
