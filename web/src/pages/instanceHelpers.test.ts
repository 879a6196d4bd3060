import { commitImageSuggestion, userImageNamespace } from './instanceHelpers';

describe('userImageNamespace', () => {
  it("is the user's name in lower case when Docker takes it as one path component", () => {
    expect(userImageNamespace('alice')).toBe('u/alice/');
    expect(userImageNamespace('Bob.Smith')).toBe('u/bob.smith/');
    expect(userImageNamespace('team-a_1')).toBe('u/team-a_1/');
  });

  it('is the name in hex otherwise, as gpuboxd writes it', () => {
    expect(userImageNamespace('-x')).toBe('u/2d78/');
    expect(userImageNamespace('a..b')).toBe('u/612e2e62/');
    expect(userImageNamespace('\u212a')).toBe('u/e284aa/'); // the Kelvin sign is not "k"
  });
});

describe('commitImageSuggestion', () => {
  it("puts a user's under their namespace, an admin's at the top", () => {
    expect(commitImageSuggestion('train', 3, 'alice')).toBe('u/alice/train:v3');
    expect(commitImageSuggestion('Train', 1, null)).toBe('train:v1');
    expect(commitImageSuggestion('a--', 1, 'alice')).toBe('u/alice/image:v1');
  });
});
