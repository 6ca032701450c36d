// WebChat's Record button: a voice note recorded with MediaRecorder, where the browser allows
// it (a secure context: HTTPS or this machine), added to the message's attachments like an
// attached audio file (the media service transcribes it). Hidden where recording is impossible.

const TYPES = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/mp4", "audio/webm"];
const EXTENSIONS = { "audio/webm": "webm", "audio/ogg": "ogg", "audio/mp4": "m4a" };

export function canRecord() {
  return Boolean(window.MediaRecorder && navigator.mediaDevices?.getUserMedia);
}

// onRecorded(file): a finished recording; onStatus(text): what to tell the user.
export function setUpVoice(button, onRecorded, onStatus) {
  if (!canRecord()) {
    button.hidden = true;
    return;
  }
  let recorder = null;

  function idle() {
    recorder = null;
    button.textContent = "Record";
    button.dataset.recording = "false";
  }

  async function start() {
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (err) {
      onStatus(`The microphone is not available: ${err.message}`);
      return;
    }
    const wanted = TYPES.find((t) => MediaRecorder.isTypeSupported(t));
    const rec = new MediaRecorder(stream, wanted ? { mimeType: wanted } : undefined);
    const chunks = [];
    rec.addEventListener("dataavailable", (ev) => {
      if (ev.data.size) chunks.push(ev.data);
    });
    rec.addEventListener("stop", () => {
      for (const track of stream.getTracks()) track.stop();
      const mime = (rec.mimeType || wanted || "audio/webm").split(";")[0];
      idle();
      if (!chunks.length) {
        onStatus("Nothing was recorded.");
        return;
      }
      const name = `voice-note-${new Date().toISOString().slice(11, 19).replaceAll(":", "")}`;
      const file = new File(chunks, `${name}.${EXTENSIONS[mime] || "webm"}`, { type: mime });
      onRecorded(file);
    });
    rec.start();
    recorder = rec;
    button.textContent = "Stop recording";
    button.dataset.recording = "true";
    onStatus("Recording\u2026");
  }

  idle();
  button.addEventListener("click", () => {
    if (recorder) recorder.stop();
    else start();
  });
}
